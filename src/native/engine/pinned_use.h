// An operation's hold on the pinned block its host memory lies in (host_memory.h has the
// blocks' JS side): a block is never freed while a task may still touch it.
#pragma once
#include <cstddef>
#include <memory>

namespace penstock {

struct PinnedBlock;

// One operation's hold on a pinned block; releasing the last hold of a released block frees it.
class PinnedUse {
 public:
  explicit PinnedUse(std::shared_ptr<PinnedBlock> block);
  ~PinnedUse();
  PinnedUse(const PinnedUse&) = delete;
  PinnedUse& operator=(const PinnedUse&) = delete;

 private:
  std::shared_ptr<PinnedBlock> block_;
};

// A hold on the pinned block holding [p, p + n), or null when that is not pinned memory.
std::unique_ptr<PinnedUse> PinnedAcquire(const char* p, size_t n);

}  // namespace penstock
