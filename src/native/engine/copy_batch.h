// Many host-to-device copies in one driver call (cuMemcpyBatchAsync, CUDA 12.8+), for a batched
// read whose ranges land apart on the GPU: one call per staging fill (per COPY_BATCH_MAX copies of
// it, batch-plan.ts) instead of one per range.
// Copies issued one call each go no faster than about 0.4 M copies/s on an H200 however many
// threads issue them (the driver serialises them); in batches, 1.6-2 M/s from four threads on.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "sys/cuda_api.h"
#include "sys/error_record.h"

namespace penstock {

struct HostToDevice {
  const char* src;
  CUdeviceptr dst;
  uint64_t n;
};

// The arrays one call hands the driver, kept by the device task that issues the calls and reused
// across its fills, so that a call allocates nothing once they have grown.
struct CopyBatchArrays {
  std::vector<CUdeviceptr> dsts, srcs;
  std::vector<size_t> sizes;
};

// Whether the driver has a batch-copy entry point (CudaState::copyBatch names it).
bool HaveCopyBatch();

// One batch call on `stream` carrying copies[0..count) (count >= 1; the driver refuses 0), the
// sources read in stream order like any asynchronous copy's. With the context current.
ErrorRecord IssueCopyBatch(const HostToDevice* copies, size_t count, int ordinal, CopyBatchArrays& arrays,
                           CUstream stream);

}  // namespace penstock
