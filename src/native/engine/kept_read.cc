#include "engine/kept_read.h"

#include <algorithm>

#include "engine/device.h"
#include "engine/kept_pages.h"
#include "engine/staging_pipe.h"
#include "sys/thread_pool.h"

namespace penstock {

ErrorRecord KeptRead::Run(uint64_t index, uint64_t* done, bool* leftInFlight) {
  FlushWorkerPipes();  // a worker's staged reads left in flight are settled before other work
  uint64_t begin = index * spec_.taskSize;
  uint64_t length = std::min(spec_.taskSize, spec_.size - begin);
  if (issued_) {
    ErrorRecord e = issued_->Wait();
    if (!e.ok()) return e;
    *done = length;
    job().AddProgress(length);
    return {};
  }
  DeviceState* d = PreparedDevice(spec_.device);
  WorkerSlot* slot = d ? d->Slot(ThreadPool::WorkerIndex()) : nullptr;
  if (!slot) return ErrorRecord::Misuse("ERR_PENSTOCK_INTERNAL", "device not prepared");
  Cuda().CtxSetCurrent(d->ctx);  // registration needs a context too
  std::shared_ptr<KeptSpan> span;
  ErrorRecord e = spec_.keepNew ? KeepRange(spec_.id, spec_.fd, spec_.fileOffset, spec_.size, spec_.settleNs, &span)
                                : CheckedKept(spec_.id, spec_.fd, spec_.fileOffset, spec_.size, &span);
  if (!e.ok()) return e;
  e = PENSTOCK_CUDA(MemcpyHtoDAsync, spec_.dev + begin, span->At(spec_.fileOffset + begin), length, slot->stream);
  ErrorRecord waited = PENSTOCK_CUDA(StreamSynchronize, slot->stream);
  if (e.ok()) e = waited;
  if (!e.ok()) return e;
  *done = length;
  job().AddProgress(length);
  return {};
}

}  // namespace penstock
