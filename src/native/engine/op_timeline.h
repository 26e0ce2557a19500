// When an operation or a batch passed its milestones (steady_clock ns, the clock
// process.hrtime reads; 0: not reached): where the time of a small one goes, in the hop to a
// worker, the work and the hop back. Written by any thread, read once it has drained.
#pragma once
#include <atomic>
#include <cstdint>

#include "engine/work_counters.h"

namespace penstock {

class OpTimeline {
 public:
  // Main thread, as its runners are queued.
  void Started() { startNs_ = NowNs(); }
  // A task began at `t`: the first one is kept.
  void TaskBegan(uint64_t t) {
    uint64_t unset = 0;
    firstTaskNs_.compare_exchange_strong(unset, t);
  }
  // One of the runners queued at the start took its first task at `t`: the latest is kept, so
  // the gap from the first task is how long waking the pool's threads took.
  void RunnerBegan(uint64_t t) { Raise(lastRunnerStartNs_, t); }
  // A task finished (its bytes where they belong).
  void TaskEnded() { Raise(lastTaskEndNs_, NowNs()); }
  void Drained() { drainedNs_ = NowNs(); }

  uint64_t StartNs() const { return startNs_.load(); }
  uint64_t FirstTaskNs() const { return firstTaskNs_.load(); }
  uint64_t LastRunnerStartNs() const { return lastRunnerStartNs_.load(); }
  uint64_t LastTaskEndNs() const { return lastTaskEndNs_.load(); }
  uint64_t DrainedNs() const { return drainedNs_.load(); }

 private:
  static void Raise(std::atomic<uint64_t>& a, uint64_t v) {
    for (uint64_t cur = a.load(); v > cur && !a.compare_exchange_weak(cur, v);) {
    }
  }
  std::atomic<uint64_t> startNs_{0};
  std::atomic<uint64_t> firstTaskNs_{0};
  std::atomic<uint64_t> lastRunnerStartNs_{0};
  std::atomic<uint64_t> lastTaskEndNs_{0};
  std::atomic<uint64_t> drainedNs_{0};
};

}  // namespace penstock
