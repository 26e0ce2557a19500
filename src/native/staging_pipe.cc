#include "staging_pipe.h"

#include "io_op.h"

namespace penstock {

namespace {
// One pipeline per GPU, so a worker alternating between GPUs keeps each one's copies in flight.
thread_local Pipe t_pipes[kMaxPipes];
}  // namespace

Pipe& WorkerPipe(int device) { return t_pipes[device]; }

void FlushWorkerPipes() {
  for (auto& p : t_pipes)
    if (p.slot) p.Flush();
}

void PollWorkerPipes() {
  for (auto& p : t_pipes)
    if (p.slot && !p.waiting.empty()) p.Poll();
}

void Pipe::Poll() {
  CUresult r = Cuda().StreamQuery(slot->stream);
  if (r == CUDA_ERROR_NOT_READY) return;
  Complete(UINT64_MAX, r == CUDA_SUCCESS ? ErrorRecord() : ErrorRecord::FromCuda(r, "cuStreamQuery"));
  halfSeq[0] = halfSeq[1] = 0;
}

void Pipe::Complete(uint64_t upTo, const ErrorRecord& err) {
  for (size_t i = 0; i < waiting.size();) {
    if (waiting[i].seq <= upTo) {
      if (!err.ok()) waiting[i].op->Fail(err);
      waiting[i].op->FinishTask();
      waiting[i] = std::move(waiting.back());
      waiting.pop_back();
    } else {
      ++i;
    }
  }
}

ErrorRecord Pipe::Reuse(int h) {
  if (!halfSeq[h]) return {};
  ErrorRecord err = PENSTOCK_CUDA(EventSynchronize, slot->events[h]);
  Complete(halfSeq[h], err);
  halfSeq[h] = 0;
  return err;
}

void Pipe::Flush() {
  if (!slot) return;
  // Small copies finish within microseconds: poll briefly before a blocking wait, whose
  // wake-up would cost more than the copy.
  const CudaApi& cu = Cuda();
  CUresult r = CUDA_ERROR_NOT_READY;
  for (int i = 0; i < 64 && r == CUDA_ERROR_NOT_READY; ++i) r = cu.StreamQuery(slot->stream);
  if (r == CUDA_ERROR_NOT_READY) r = cu.StreamSynchronize(slot->stream);
  ErrorRecord err = CudaCallRecord(r, "cuStreamSynchronize");
  Complete(UINT64_MAX, err);
  halfSeq[0] = halfSeq[1] = 0;
  slot = nullptr;
  dev = nullptr;
}

}  // namespace penstock
