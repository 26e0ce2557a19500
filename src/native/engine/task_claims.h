// Which tasks of an operation are still unclaimed. Staged runners take them one at a time from
// the front, the mapped runner several at a time from the back; one atomic word holds both ends,
// so no task is claimed twice and the two meet wherever their speeds put the boundary.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdint>

namespace penstock {

// Tasks [first, first + count); count 0: nothing was left.
struct Claim {
  uint64_t first = 0;
  uint64_t count = 0;
};

class TaskClaims {
 public:
  // The most tasks the word can count: 2^32 tasks would take a buffer of 16 TiB at the
  // smallest task size TypeScript plans.
  static constexpr uint64_t kMaxTasks = 0xffffffffu;

  // Tasks [0, tasks) are unclaimed (tasks <= kMaxTasks).
  void Reset(uint64_t tasks) { word_.store(tasks << 32); }

  Claim Front() {
    uint64_t cur = word_.load();
    for (;;) {
      uint64_t front = cur & kMaxTasks, back = cur >> 32;
      if (front >= back) return {};
      if (word_.compare_exchange_weak(cur, cur + 1)) return {front, 1};
    }
  }

  // Up to `most` tasks from the back, and at most 1/`divisor` of those left (but one while any
  // is left), so the last claim does not keep the operation waiting after the front has run dry.
  Claim Back(uint64_t most, uint64_t divisor) {
    uint64_t cur = word_.load();
    for (;;) {
      uint64_t front = cur & kMaxTasks, back = cur >> 32;
      uint64_t left = back > front ? back - front : 0;
      uint64_t take = std::min(most, std::max<uint64_t>(left / divisor, left ? 1 : 0));
      if (take == 0) return {};
      if (word_.compare_exchange_weak(cur, ((back - take) << 32) | front)) return {back - take, take};
    }
  }

 private:
  // Low 32 bits: the next unclaimed task from the front; high 32: one past the last from the back.
  std::atomic<uint64_t> word_{0};
};

}  // namespace penstock
