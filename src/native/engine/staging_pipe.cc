#include "engine/staging_pipe.h"

#include "engine/job.h"

namespace penstock {

namespace {
// One pipeline per GPU, so a worker alternating between GPUs keeps each one's copies in flight.
thread_local Pipe t_pipes[kMaxPipes];

// Ends a waiting task: its last copy completed, or failed with `err`.
auto FinishWith(ErrorRecord err) {
  return [err = std::move(err)](std::shared_ptr<Job>& job) {
    if (!err.ok()) job->Fail(err);
    job->FinishTask();
  };
}
}  // namespace

Pipe& WorkerPipe(int device) { return t_pipes[device]; }

void FlushWorkerPipes() {
  for (auto& p : t_pipes)
    if (p.slot) p.Flush();
}

void PollWorkerPipes() {
  for (auto& p : t_pipes)
    if (p.slot && p.sequence.HasWaiting()) p.Poll();
}

void Pipe::Poll() {
  CUresult r = Cuda().StreamQuery(slot->stream);
  if (r == CUDA_ERROR_NOT_READY) return;
  sequence.AllComplete(FinishWith(CudaCallRecord(r, "cuStreamQuery")));
}

ErrorRecord Pipe::Reuse(int h) {
  if (!sequence.InFlight(h)) return {};
  ErrorRecord err = PENSTOCK_CUDA(EventSynchronize, slot->events[h]);
  sequence.HalfComplete(h, FinishWith(err));
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
  sequence.AllComplete(FinishWith(CudaCallRecord(r, "cuStreamSynchronize")));
  slot = nullptr;
}

}  // namespace penstock
