// Tasks, bytes and thread time of one share of an operation's work (the share its route
// carried, the mapped share), counted by the workers as they go.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>

namespace penstock {

struct WorkCounters {
  std::atomic<uint64_t> tasks{0};
  std::atomic<uint64_t> bytes{0};
  std::atomic<uint64_t> busyNs{0};
  // Of the busy time: inside read and write system calls (for the mapped share: pinning and
  // unpinning), and waiting for GPU copies.
  std::atomic<uint64_t> ioNs{0};
  std::atomic<uint64_t> waitNs{0};
};

inline uint64_t NowNs() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

// Adds the time until the end of its scope to a counter (per-stage timing of tasks).
class StageTimer {
 public:
  explicit StageTimer(std::atomic<uint64_t>& sink) : sink_(sink), t0_(NowNs()) {}
  ~StageTimer() { sink_ += NowNs() - t0_; }
  StageTimer(const StageTimer&) = delete;
  StageTimer& operator=(const StageTimer&) = delete;

 private:
  std::atomic<uint64_t>& sink_;
  uint64_t t0_;
};

}  // namespace penstock
