// The gathered read: a mid-size staged read into the GPU whose tasks all stream into one
// pinned stage, at their own offsets, while the finished prefix goes to the GPU in order.
// Through the workers' bounce halves, every task of such a read finishes its pread at about the
// same moment and all the copies land on the copy engine at once, after the reading; here the
// first copy starts once the first few tasks are in, and the copies follow one another while
// the rest is read (on the stage's stream).
//
// Whoever finishes a task tries to become the feeder (one at a time, `feeding_`) and issues
// the prefix that has grown by at least StagedSpec::gatherCopy bytes, or all of it once every task
// is in. The drain (the last task's thread) waits for every copy and gives the stage back.
#include "engine/device.h"
#include "engine/file_tasks.h"
#include "engine/read_scratch.h"

namespace penstock {

void StagedTransfer::TakeGather() {
  DeviceState* d = PreparedDevice(spec_.device);
  if (!d || !d->gather.TryTake(file_.size)) return;
  gather_ = &d->gather;
  gathered_ = true;
  gatherCtx_ = d->ctx;
  arrived_ = std::make_unique<std::atomic<bool>[]>(tasks_);
  for (uint64_t i = 0; i < tasks_; ++i) arrived_[i].store(false, std::memory_order_relaxed);
}

ErrorRecord StagedTransfer::GatheredReadTask(uint64_t index, uint64_t begin, uint64_t length, uint64_t* done) {
  ErrorRecord err = ReadThroughScratch(gather_->buffer + begin, file_.fileOffset + begin, length, spec_.stageScratch,
                                       [&](uint64_t n) { *done += n; });
  if (!err.ok()) return err;
  // The scratch's streaming stores were fenced (StreamCopy), so the bytes are in memory before
  // any thread that sees this flag issues their copy.
  arrived_[index].store(true);
  arrivals_.fetch_add(1);
  Cuda().CtxSetCurrent(gatherCtx_);
  FeedGather();
  return {};
}

void StagedTransfer::FeedGather() {
  for (;;) {
    uint64_t seen = arrivals_.load();
    // Held by another: it looks again after letting go if anything arrived meanwhile.
    if (feeding_.exchange(true)) return;
    IssueGathered();
    feeding_.store(false);
    if (arrivals_.load() == seen) return;
  }
}

void StagedTransfer::IssueGathered() {
  uint64_t r = gatherReady_;
  while (r < tasks_ && arrived_[r].load()) ++r;
  gatherReady_ = r;
  // Every task of the prefix has noted the file's end if it met it.
  uint64_t end = std::min<uint64_t>(r * file_.taskSize, BytesMoved());
  if (end <= gatherIssued_ || job().Stopped()) return;
  // The last task's arrival always gets here (itself, or the feeder it found, looking again), so
  // the rest goes whatever its size.
  if (r < tasks_ && end - gatherIssued_ < spec_.gatherCopy) return;
  uint64_t n = end - gatherIssued_;
  ErrorRecord e = PENSTOCK_CUDA(MemcpyHtoDAsync, spec_.dev + gatherIssued_, gather_->buffer + gatherIssued_, n, gather_->stream);
  if (!e.ok()) {
    job().Fail(std::move(e));
    return;
  }
  gatherIssued_ = end;
  ++gatherCopies_;
  job().AddProgress(n);
}

void StagedTransfer::FinishGather() {
  // Every task has finished, and with it every feeder, which issued all there was to issue.
  Cuda().CtxSetCurrent(gatherCtx_);
  uint64_t t0 = NowNs();
  ErrorRecord e = PENSTOCK_CUDA(StreamSynchronize, gather_->stream);
  if (!e.ok()) job().Fail(std::move(e));
  // The wait is this thread's work for the job, though after its last task: busy time
  // as well as copy-wait time, so that the stages stay within the busy time.
  uint64_t waited = NowNs() - t0;
  job().Work().waitNs += waited;
  job().Work().busyNs += waited;
  // Only once no copy reads it any more may the next job write into it.
  gather_->Give();
  gather_ = nullptr;
}

}  // namespace penstock
