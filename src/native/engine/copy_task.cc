#include "engine/copy_task.h"

#include "engine/device.h"
#include "engine/staging_pipe.h"

namespace penstock {

ErrorRecord BufferCopy::Run(uint64_t index, uint64_t* done, bool* leftInFlight) {
  FlushWorkerPipes();  // a worker's staged reads left in flight are settled before other work
  uint64_t length = spec_.size;
  CUcontext ctx;
  ErrorRecord e = RetainContext(spec_.device, &ctx);
  if (!e.ok()) return e;
  const CudaApi& cu = Cuda();
  cu.CtxSetCurrent(ctx);
  CUresult r = spec_.toDevice ? cu.MemcpyHtoD(spec_.dev, spec_.host, length) : cu.MemcpyDtoH(spec_.host, spec_.dev, length);
  if (r != CUDA_SUCCESS) return ErrorRecord::FromCuda(r, spec_.toDevice ? "cuMemcpyHtoD" : "cuMemcpyDtoH");
  *done = length;
  job().AddProgress(length);
  return {};
}

}  // namespace penstock
