// A buffer copy between host memory and a GPU buffer (DeviceBuffer.copyFrom / toBuffer): one
// synchronous driver copy on a pool worker, so the JS thread never waits for it.
#pragma once
#include <algorithm>
#include <cstdint>

#include "engine/job.h"
#include "sys/cuda_api.h"

namespace penstock {

struct CopySpec {
  bool toDevice = true;
  int device = -1;
  char* host = nullptr;  // already offset
  CUdeviceptr dev = 0;
  uint64_t size = 0;
};

class BufferCopy final : public JobTasks {
 public:
  explicit BufferCopy(const CopySpec& spec) : spec_(spec) {}
  // One task, the whole copy.
  uint64_t TaskCount() const override { return spec_.size == 0 ? 0 : 1; }
  ErrorRecord Run(uint64_t index, uint64_t* done, bool* leftInFlight) override;
  uint64_t Size() const { return spec_.size; }

 private:
  const CopySpec spec_;
};

}  // namespace penstock
