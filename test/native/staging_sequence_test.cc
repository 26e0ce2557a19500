// Unit checks of the staging pipeline's sequencing (src/native/engine/staging_sequence.h): which half
// the next piece takes, which event must complete before a half is written again, and which
// waiting tasks finish when an event completes. A simulated in-order stream stands in for CUDA.
#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "../../src/native/engine/staging_sequence.h"
#include "check.h"

namespace {

using Sequence = penstock::StagingSequence<int>;

// Collects the waiters that finish, in the order they do.
struct Finished {
  std::vector<int> ids;
  auto Take() {
    return [this](int& id) { ids.push_back(id); };
  }
  bool Exactly(std::vector<int> want) {
    std::vector<int> got = ids;
    std::sort(got.begin(), got.end());
    std::sort(want.begin(), want.end());
    ids.clear();
    return got == want;
  }
};

void HalvesAlternate() {
  Sequence s;
  EXPECT(s.NextHalf() == 0);
  EXPECT(s.InFlight(0) == 0 && s.InFlight(1) == 0);
  s.Recorded(0);
  EXPECT(s.NextHalf() == 1 && s.InFlight(0) == 1);
  s.Recorded(1);
  EXPECT(s.NextHalf() == 0 && s.InFlight(1) == 2);
  s.Recorded(0);  // the half's new event replaces its old one
  EXPECT(s.NextHalf() == 1 && s.InFlight(0) == 3 && s.InFlight(1) == 2);
}

// Two tasks, as StagedReadTask drives them: each waits for its half before writing it again and
// leaves its last copy in flight.
void TasksFinishWithTheirLastCopy() {
  Sequence s;
  Finished f;
  // Task 1: three pieces (halves 0, 1, 0: events 1, 2, 3), last copy left in flight.
  s.Recorded(0);
  s.Recorded(1);
  EXPECT(s.InFlight(0) == 1);
  s.HalfComplete(0, f.Take());  // before half 0 is written again
  s.Recorded(0);
  s.Await(1);
  EXPECT(f.Exactly({}) && s.HasWaiting());
  // Task 2 starts in half 1: event 2 completing does not end task 1 (its last copy is event 3).
  EXPECT(s.NextHalf() == 1 && s.InFlight(1) == 2);
  s.HalfComplete(1, f.Take());
  EXPECT(f.Exactly({}));
  EXPECT(s.InFlight(1) == 0);
  s.Recorded(1);  // event 4
  // Its second piece goes into half 0: event 3 completes, and task 1 with it.
  s.HalfComplete(0, f.Take());
  EXPECT(f.Exactly({1}));
  s.Recorded(0);  // event 5
  s.Await(2);
  EXPECT(f.Exactly({}));
  // The worker runs out of work: everything completes, task 2 finishes, both halves are free.
  s.AllComplete(f.Take());
  EXPECT(f.Exactly({2}) && !s.HasWaiting());
  EXPECT(s.InFlight(0) == 0 && s.InFlight(1) == 0);
}

// A half's completion ends every task whose last event is no later, whichever half it used.
void CompletionIsInOrder() {
  Sequence s;
  Finished f;
  s.Recorded(0);  // 1
  s.Await(10);
  s.Recorded(1);  // 2
  s.Await(20);
  s.Recorded(0);  // 3
  s.Await(30);
  s.HalfComplete(1, f.Take());  // event 2: tasks up to it
  EXPECT(f.Exactly({10, 20}));
  EXPECT(s.InFlight(0) == 3);  // the later event on the other half is still in flight
  s.HalfComplete(1, f.Take());  // nothing in flight there any more: nothing ends
  EXPECT(f.Exactly({}));
  s.HalfComplete(0, f.Take());
  EXPECT(f.Exactly({30}) && !s.HasWaiting());
}

// Any mix of tasks, pieces, polls and waits against a simulated stream that completes events in
// order: a task never finishes before its last copy has completed, and every task finishes once
// the stream is idle.
void SimulatedStream() {
  std::mt19937 rng(7);
  Sequence s;
  uint64_t recorded = 0, completed = 0;
  std::vector<uint64_t> lastEvent;  // per task id
  std::vector<int> finishedCount;
  bool early = false;
  auto finish = [&](int& id) {
    if (lastEvent[id] > completed) early = true;
    ++finishedCount[id];
  };
  for (int task = 0; task < 2000; ++task) {
    lastEvent.push_back(0);
    finishedCount.push_back(0);
    int pieces = 1 + static_cast<int>(rng() % 4);
    for (int p = 0; p < pieces; ++p) {
      int h = s.NextHalf();
      if (uint64_t e = s.InFlight(h)) {
        completed = std::max(completed, e);  // the half's event is waited for
        s.HalfComplete(h, finish);
      }
      // The stream may have run ahead on its own.
      completed = std::max(completed, std::min(recorded, completed + rng() % 3));
      s.Recorded(h);
      lastEvent[task] = ++recorded;
      EXPECT(s.InFlight(h) == recorded);
    }
    s.Await(task);
    if (rng() % 5 == 0 && completed == recorded) s.AllComplete(finish);  // a poll that finds the stream idle
  }
  completed = recorded;
  s.AllComplete(finish);
  EXPECT(!early);
  EXPECT(std::all_of(finishedCount.begin(), finishedCount.end(), [](int n) { return n == 1; }));
  EXPECT(!s.HasWaiting());
}

}  // namespace

int main() {
  HalvesAlternate();
  TasksFinishWithTheirLastCopy();
  CompletionIsInOrder();
  SimulatedStream();
  return check::Finish("staging_sequence");
}
