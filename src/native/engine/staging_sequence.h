// The sequencing of a worker's staging pipeline, apart from the CUDA calls that drive it
// (staging_pipe.cc). Pieces alternate between two bounce halves; each piece's copy out of its
// half is followed on the worker's one in-order stream by an event, numbered in recording
// order. A task that leaves its last copy in flight waits for that copy's number, and the
// completion of one event means every earlier one has completed too.
#pragma once
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace penstock {

template <typename Waiter>
class StagingSequence {
 public:
  // The half the next piece goes into.
  int NextHalf() const { return next_; }
  // The number of the event recorded after half `h`'s copy while it may be in flight (0: none):
  // it must complete before the half is written again.
  uint64_t InFlight(int h) const { return half_[h]; }
  bool HasWaiting() const { return !waiting_.empty(); }

  // A copy out of half `h` and its event were recorded; the next piece goes into the other half.
  void Recorded(int h) {
    half_[h] = ++last_;
    next_ = h ^ 1;
  }
  // A task whose last copy is the latest one recorded: it finishes when that copy completes.
  void Await(Waiter w) { waiting_.push_back({std::move(w), last_}); }

  // Half `h`'s event has completed, and with it every earlier one: `finish(waiter)` for each
  // task those copies end.
  template <typename Finish>
  void HalfComplete(int h, Finish&& finish) {
    uint64_t upTo = half_[h];
    half_[h] = 0;
    Complete(upTo, finish);
  }
  // Everything recorded has completed (the stream is idle): every waiting task finishes.
  template <typename Finish>
  void AllComplete(Finish&& finish) {
    half_[0] = half_[1] = 0;
    Complete(UINT64_MAX, finish);
  }

 private:
  struct Waiting {
    Waiter waiter;
    uint64_t upTo;  // the number of the task's last event
  };

  template <typename Finish>
  void Complete(uint64_t upTo, Finish& finish) {
    for (size_t i = 0; i < waiting_.size();) {
      if (waiting_[i].upTo <= upTo) {
        Waiter w = std::move(waiting_[i].waiter);
        waiting_[i] = std::move(waiting_.back());
        waiting_.pop_back();
        finish(w);
      } else {
        ++i;
      }
    }
  }

  int next_ = 0;
  uint64_t last_ = 0;            // the number of the latest event recorded
  uint64_t half_[2] = {0, 0};    // per half: its event in flight (0: none)
  std::vector<Waiting> waiting_;
};

}  // namespace penstock
