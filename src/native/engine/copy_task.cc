// A buffer copy between host memory and a GPU buffer (DeviceBuffer.copyFrom / toBuffer): one
// synchronous driver copy on a pool worker, so the JS thread never waits for it.
#include "engine/device.h"
#include "engine/io_op.h"

namespace penstock {

ErrorRecord Operation::CopyTask(uint64_t begin, uint64_t length, uint64_t* done) {
  CUcontext ctx;
  ErrorRecord e = RetainContext(spec_.device, &ctx);
  if (!e.ok()) return e;
  const CudaApi& cu = Cuda();
  cu.CtxSetCurrent(ctx);
  bool toDevice = spec_.kind == OpKind::CopyToDevice;
  CUresult r = toDevice ? cu.MemcpyHtoD(spec_.dev + begin, spec_.host + begin, length)
                        : cu.MemcpyDtoH(spec_.host + begin, spec_.dev + begin, length);
  if (r != CUDA_SUCCESS) return ErrorRecord::FromCuda(r, toDevice ? "cuMemcpyHtoD" : "cuMemcpyDtoH");
  *done = length;
  AddProgress(length);
  return {};
}

}  // namespace penstock
