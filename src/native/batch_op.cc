// The tasks of a batched read. Host tasks pread straight into the target where the plan says
// the read is exactly one contiguous stretch of it, and otherwise through per-thread scratch.
// Device tasks gather their reads into the worker's pinned bounce halves one after another and
// copy each half to the GPU with as few copies as the targets allow: pieces next to each other
// both in staging and on the GPU go in one copy, so ranges ordered by target address (as the plan
// orders them) become one copy per half. While one half is copied, the next is filled.
#include "batch_op.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "device.h"
#include "posix_io.h"
#include "staging_pipe.h"
#include "thread_pool.h"
#include "work_counters.h"

namespace penstock {

namespace {

// The calling worker's bounce buffer and stream for a prepared device (nullptr if it has none).
WorkerSlot* SlotFor(DeviceState* d, int worker) {
  return d ? d->Slot(worker) : nullptr;
}

struct Copy {
  const char* src;
  CUdeviceptr dst;
  uint64_t n;
};

}  // namespace

void BatchOp::Start() {
  timeline_.Started();
  remaining_ = tasks.size();
  if (tasks.empty()) {
    Finished();
    return;
  }
  ThreadPool& pool = ThreadPool::Instance();
  size_t runners = std::min<size_t>(tasks.size(), static_cast<size_t>(std::max(1, pool.Size())));
  runners_ = runners;
  auto self = shared_from_this();
  for (size_t i = 0; i < runners; ++i) pool.Submit([self] { self->RunNext(); });
}

void BatchOp::CancelAndWait() {
  cancelled_ = true;
  std::unique_lock<std::mutex> lock(drainMutex_);
  drained_.wait(lock, [&] { return finished_; });
}

void BatchOp::RunNext() {
  uint32_t i = next_.fetch_add(1);
  if (i >= tasks.size()) return;
  // Queue the next turn first, so the runner rejoins behind other operations' runners; only
  // while tasks remain beyond one for each runner queued (a turn that finds nothing left would
  // cost a wake-up for nothing).
  if (i + runners_ < tasks.size()) {
    auto self = shared_from_this();
    ThreadPool::Instance().Submit([self] { self->RunNext(); });
  }
  uint64_t t0 = NowNs();
  timeline_.TaskBegan(t0);
  if (i < runners_) timeline_.RunnerBegan(t0);
  if (!cancelled_ && !failed_) {
    ErrorRecord e = tasks[i].device < 0 ? HostTask(tasks[i]) : DeviceTask(tasks[i]);
    if (!e.ok()) Fail(std::move(e));
  }
  busyNs_ += NowNs() - t0;
  timeline_.TaskEnded();
  if (remaining_.fetch_sub(1) == 1) Finished();
}

void BatchOp::Finished() {
  timeline_.Drained();
  // Posted before teardown may go on: the completion channel is torn down once teardown returns.
  Post(true);
  {
    std::lock_guard<std::mutex> lock(drainMutex_);
    finished_ = true;
  }
  drained_.notify_all();
}

void BatchOp::Post(bool done) { listener->Posted(done); }

uint64_t BatchOp::TakeProgress() {
  progressPending_ = false;
  return bytesDone_.load();
}

void BatchOp::AddProgress(uint64_t n) {
  bytesDone_ += n;
  if (wantProgress && !progressPending_.exchange(true)) Post(false);
}

void BatchOp::Fail(ErrorRecord e) {
  std::lock_guard<std::mutex> lock(errorMutex_);
  if (failed_) return;
  error_ = std::move(e);
  failed_ = true;
}

ErrorRecord BatchOp::Error() const {
  std::lock_guard<std::mutex> lock(errorMutex_);
  return error_;
}

void BatchOp::ReadFailed(uint32_t r, int err) {
  std::lock_guard<std::mutex> lock(errorMutex_);
  readErrors_.push_back({r, ErrorRecord::Os(err, "pread")});
}

int64_t BatchOp::ReadInto(uint32_t r, char* buf) {
  const Read& rd = reads[r];
  int err = 0;
  ssize_t got;
  {
    uint64_t t0 = NowNs();
    got = PreadFull(rd.fd, buf, rd.length, rd.fileOffset, false, &err);
    ioNs_ += NowNs() - t0;
  }
  ++preads_;
  if (got < 0) {
    ReadFailed(r, err);
    return -1;
  }
  return got;
}

uint64_t BatchOp::Arrived(const Piece& p, int64_t got) const {
  if (got <= 0 || static_cast<uint64_t>(got) <= p.at) return 0;
  return std::min<uint64_t>(p.size, static_cast<uint64_t>(got) - p.at);
}

ErrorRecord BatchOp::HostTask(const Task& t) {
  for (uint32_t r = t.firstRead; r < t.firstRead + t.reads; ++r) {
    if (cancelled_ || failed_) break;
    const Read& rd = reads[r];
    int64_t got;
    if (rd.directTarget >= 0) {
      got = ReadInto(r, hostBase[rd.directTarget] + rd.directOffset);
    } else {
      char* scratch = Scratch(rd.length);
      if (!scratch) return ErrorRecord::Os(ENOMEM, "posix_memalign");
      got = ReadInto(r, scratch);
      for (uint32_t k = rd.firstPiece; k < rd.firstPiece + rd.pieces; ++k) {
        const Piece& p = pieces[k];
        uint64_t n = Arrived(p, got);
        if (n) memcpy(hostBase[p.target] + p.targetOffset, scratch + p.at, n);
      }
    }
    uint64_t moved = 0;
    for (uint32_t k = rd.firstPiece; k < rd.firstPiece + rd.pieces; ++k) {
      uint64_t n = Arrived(pieces[k], got);
      pieceBytes[k] = static_cast<double>(n);
      moved += n;
    }
    if (moved) AddProgress(moved);
  }
  return {};
}

ErrorRecord BatchOp::DeviceTask(const Task& t) {
  int ordinal = t.device;
  DeviceState* d = PreparedDevice(ordinal);
  WorkerSlot* slot = SlotFor(d, ThreadPool::WorkerIndex());
  if (!slot) return ErrorRecord::Misuse("ERR_PENSTOCK_INTERNAL", "device not prepared for this worker");
  // The bounce halves are this task's until it returns: settle what the worker's staged reads
  // left in flight in them first, and leave nothing in flight after.
  FlushWorkerPipes();
  const CudaApi& cu = Cuda();
  cu.CtxSetCurrent(d->ctx);
  std::vector<Copy> copies;
  uint64_t halfBytes[2] = {0, 0};  // bytes landing on the GPU when each half's copies complete
  bool pending[2] = {false, false};
  int h = 0;
  uint64_t fill = 0;
  ErrorRecord err;
  auto wait = [&](int half) -> ErrorRecord {
    if (!pending[half]) return {};
    uint64_t t0 = NowNs();
    CUresult r = cu.EventSynchronize(slot->events[half]);
    waitNs_ += NowNs() - t0;
    pending[half] = false;
    if (r != CUDA_SUCCESS) return ErrorRecord::FromCuda(r, "cuEventSynchronize");
    if (halfBytes[half]) AddProgress(halfBytes[half]);
    halfBytes[half] = 0;
    return {};
  };
  auto flush = [&]() -> ErrorRecord {  // issues the current half's copies
    for (const Copy& c : copies) {
      CUresult r = cu.MemcpyHtoDAsync(c.dst, c.src, c.n, slot->stream);
      if (r != CUDA_SUCCESS) return ErrorRecord::FromCuda(r, "cuMemcpyHtoDAsync");
      ++copies_;
    }
    if (!copies.empty()) {
      CUresult r = cu.EventRecord(slot->events[h], slot->stream);
      if (r != CUDA_SUCCESS) return ErrorRecord::FromCuda(r, "cuEventRecord");
      pending[h] = true;
    }
    copies.clear();
    return {};
  };
  for (uint32_t r = t.firstRead; r < t.firstRead + t.reads && err.ok(); ++r) {
    if (cancelled_ || failed_) break;
    const Read& rd = reads[r];
    if (fill + rd.length > slot->half) {
      if (!(err = flush()).ok()) break;
      h ^= 1;
      fill = 0;
      if (!(err = wait(h)).ok()) break;
    }
    char* at = slot->bounce + h * slot->stride + fill;
    int64_t got = ReadInto(r, at);
    for (uint32_t k = rd.firstPiece; k < rd.firstPiece + rd.pieces; ++k) {
      const Piece& p = pieces[k];
      uint64_t n = Arrived(p, got);
      pieceBytes[k] = static_cast<double>(n);
      if (!n) continue;
      const char* src = at + p.at;
      CUdeviceptr dst = deviceBase[p.target - hostBase.size()] + p.targetOffset;
      Copy* last = copies.empty() ? nullptr : &copies.back();
      if (last && last->src + last->n == src && last->dst + last->n == dst) last->n += n;
      else copies.push_back({src, dst, n});
      halfBytes[h] += n;
    }
    fill += rd.length;
  }
  if (err.ok()) err = flush();
  // Nothing of this task may stay in flight: the halves go back to the worker's staged reads.
  ErrorRecord e0 = wait(0), e1 = wait(1);
  if (err.ok()) err = !e0.ok() ? e0 : e1;
  if (!err.ok()) cu.StreamSynchronize(slot->stream);
  return err;
}

}  // namespace penstock
