// A read of kept pages on the pool (kept_pages.h): each task checks the span (or, as the read's
// one task, registers it) and makes one copy on its worker's stream; or the read's one copy was
// issued on the calling thread already (issued_copy.h) and its task only waits for it.
#pragma once
#include <cstdint>
#include <memory>

#include "engine/issued_copy.h"
#include "engine/job.h"
#include "sys/cuda_api.h"

namespace penstock {

struct KeptSpec {
  uint32_t id = 0;  // the span's id
  // Registers the span first, refusing a file changed within `settleNs` of now.
  bool keepNew = false;
  uint64_t settleNs = 0;
  int fd = -1;
  uint64_t fileOffset = 0;
  uint64_t size = 0;
  uint64_t taskSize = 0;
  int device = -1;
  CUdeviceptr dev = 0;
};

class KeptRead final : public JobTasks {
 public:
  // `issued`: the copy already in flight that the read's one task waits for (or null).
  KeptRead(const KeptSpec& spec, std::unique_ptr<IssuedCopy> issued) : spec_(spec), issued_(std::move(issued)) {}
  uint64_t TaskCount() const override { return spec_.size == 0 ? 0 : (spec_.size + spec_.taskSize - 1) / spec_.taskSize; }
  ErrorRecord Run(uint64_t index, uint64_t* done, bool* leftInFlight) override;
  // An issued copy is waited for even once the read stopped: its bytes are moving.
  bool RunsWhenStopped() const override { return issued_ != nullptr; }
  uint64_t Size() const { return spec_.size; }

 private:
  const KeptSpec spec_;
  std::unique_ptr<IssuedCopy> issued_;
};

}  // namespace penstock
