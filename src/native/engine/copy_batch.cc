#include "engine/copy_batch.h"

namespace penstock {

bool HaveCopyBatch() {
  const CudaApi& cu = Cuda();
  return cu.MemcpyBatchAsync || cu.MemcpyBatchAsyncFailIdx;
}

ErrorRecord IssueCopyBatch(const HostToDevice* copies, size_t count, int ordinal, CopyBatchArrays& arrays,
                           CUstream stream) {
  const CudaApi& cu = Cuda();
  if (!count || !HaveCopyBatch())
    return ErrorRecord::Misuse("ERR_PENSTOCK_INTERNAL", "no copies, or no batch copies in this driver");
  arrays.dsts.resize(count);
  arrays.srcs.resize(count);
  arrays.sizes.resize(count);
  for (size_t i = 0; i < count; ++i) {
    arrays.dsts[i] = copies[i].dst;
    // Unified addressing: a host pointer is its own address for the driver.
    arrays.srcs[i] = reinterpret_cast<CUdeviceptr>(copies[i].src);
    arrays.sizes[i] = copies[i].n;
  }
  // One set of attributes for every copy (attrsIdxs {0}). The location hints matter only for
  // managed memory; they say what the memory is.
  CUmemcpyAttributes attrs{};
  attrs.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
  attrs.srcLocHint = {CU_MEM_LOCATION_TYPE_HOST, 0};
  attrs.dstLocHint = {CU_MEM_LOCATION_TYPE_DEVICE, ordinal};
  size_t attrsIdx = 0;
  const char* call = CudaStatus().copyBatch.c_str();
  CUresult r;
  if (cu.MemcpyBatchAsync) {
    r = cu.MemcpyBatchAsync(arrays.dsts.data(), arrays.srcs.data(), arrays.sizes.data(), count, &attrs, &attrsIdx, 1,
                            stream);
  } else {
    size_t failIdx = 0;
    r = cu.MemcpyBatchAsyncFailIdx(arrays.dsts.data(), arrays.srcs.data(), arrays.sizes.data(), count, &attrs,
                                   &attrsIdx, 1, &failIdx, stream);
  }
  return r == CUDA_SUCCESS ? ErrorRecord{} : ErrorRecord::FromCuda(r, call);
}

}  // namespace penstock
