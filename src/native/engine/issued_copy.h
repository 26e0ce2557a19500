// A copy into a GPU issued on the calling thread before its operation reaches the pool, for
// operations that are one copy (reads of kept pages): the copy engine starts at once, and the
// worker that takes the operation's one task wakes while the copy already runs, then waits for
// it. The pool's wake-up, otherwise ahead of the copy, is hidden behind it.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "sys/cuda_api.h"
#include "sys/error_record.h"

namespace penstock {

struct DeviceState;

// Per GPU: the stream such copies go on (never the pool's or the inline reads': they would
// queue behind those) and the events that mark their ends, reused, never destroyed.
struct IssueLane {
  std::mutex mutex;
  CUstream stream = nullptr;
  std::vector<CUevent> idle;
};

class IssuedCopy {
 public:
  // Queues a copy of `size` bytes from `src` (pinned or registered host memory that `source`
  // keeps alive) to `dst` on device `d`'s issue lane; the caller has `d`'s context current.
  static ErrorRecord Issue(DeviceState* d, CUdeviceptr dst, const void* src, uint64_t size,
                           std::shared_ptr<const void> source, std::unique_ptr<IssuedCopy>* out);
  // Waits for the copy (any thread, once): its result.
  ErrorRecord Wait();
  // Waits first if nobody did: the source must outlive the copy whatever became of the operation.
  ~IssuedCopy();
  IssuedCopy(const IssuedCopy&) = delete;
  IssuedCopy& operator=(const IssuedCopy&) = delete;

 private:
  IssuedCopy() = default;
  DeviceState* device_ = nullptr;
  CUevent done_ = nullptr;
  bool waited_ = false;
  std::shared_ptr<const void> source_;
};

}  // namespace penstock
