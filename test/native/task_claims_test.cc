// Unit checks of the claim arithmetic (src/native/engine/task_claims.h): tasks taken from the front one
// at a time and from the back several at a time, each exactly once, from one thread and from
// several at once.
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "../../src/native/engine/task_claims.h"
#include "check.h"

namespace {

using penstock::Claim;
using penstock::TaskClaims;

void FrontInOrder() {
  TaskClaims c;
  c.Reset(3);
  for (uint64_t i = 0; i < 3; ++i) {
    Claim k = c.Front();
    EXPECT(k.count == 1 && k.first == i);
  }
  EXPECT(c.Front().count == 0);
  EXPECT(c.Back(8, 4).count == 0);
}

void NothingToClaim() {
  TaskClaims c;
  EXPECT(c.Front().count == 0);  // never reset: no tasks
  c.Reset(0);
  EXPECT(c.Front().count == 0);
  EXPECT(c.Back(1, 1).count == 0);
}

void BackTakesAShareOfWhatIsLeft() {
  TaskClaims c;
  c.Reset(100);
  // A quarter of 100 is 25, capped at 16.
  Claim k = c.Back(16, 4);
  EXPECT(k.first == 84 && k.count == 16);
  // A quarter of 84 is 21: within the cap of 32.
  k = c.Back(32, 4);
  EXPECT(k.first == 63 && k.count == 21);
  // Divisor 1: everything left, up to the cap.
  k = c.Back(1000, 1);
  EXPECT(k.first == 0 && k.count == 63);
  EXPECT(c.Back(1000, 1).count == 0);
  EXPECT(c.Front().count == 0);
}

void BackTakesOneWhenTheShareRoundsToNone() {
  TaskClaims c;
  c.Reset(3);
  Claim k = c.Back(8, 4);  // 3 / 4 is 0: one task, so the back still moves
  EXPECT(k.first == 2 && k.count == 1);
  k = c.Back(8, 4);
  EXPECT(k.first == 1 && k.count == 1);
  k = c.Front();
  EXPECT(k.first == 0 && k.count == 1);
  EXPECT(c.Back(8, 4).count == 0);
}

void EndsMeet() {
  TaskClaims c;
  c.Reset(10);
  std::vector<int> seen(10, 0);
  for (int round = 0;; ++round) {
    Claim k = round % 2 ? c.Back(3, 2) : c.Front();
    if (!k.count) break;
    for (uint64_t i = k.first; i < k.first + k.count; ++i) ++seen[i];
  }
  for (int n : seen) EXPECT(n == 1);
}

void LargestCount() {
  TaskClaims c;
  c.Reset(TaskClaims::kMaxTasks);
  Claim k = c.Back(1, 1);
  EXPECT(k.first == TaskClaims::kMaxTasks - 1 && k.count == 1);
  k = c.Front();
  EXPECT(k.first == 0 && k.count == 1);
  k = c.Back(UINT64_MAX, 2);  // half of what is left
  EXPECT(k.count == (TaskClaims::kMaxTasks - 2) / 2 && k.first + k.count == TaskClaims::kMaxTasks - 1);
}

// Three threads at the front, one at the back: every task claimed exactly once.
void Concurrent() {
  constexpr uint64_t kTasks = 200000;
  TaskClaims c;
  c.Reset(kTasks);
  std::vector<std::atomic<int>> seen(kTasks);
  auto front = [&] {
    for (Claim k; (k = c.Front()).count;) seen[k.first]++;
  };
  auto back = [&] {
    for (Claim k; (k = c.Back(64, 4)).count;)
      for (uint64_t i = k.first; i < k.first + k.count; ++i) seen[i]++;
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i) threads.emplace_back(front);
  threads.emplace_back(back);
  for (auto& t : threads) t.join();
  uint64_t once = 0;
  for (auto& n : seen) once += n.load() == 1;
  EXPECT(once == kTasks);
}

}  // namespace

int main() {
  FrontInOrder();
  NothingToClaim();
  BackTakesAShareOfWhatIsLeft();
  BackTakesOneWhenTheShareRoundsToNone();
  EndsMeet();
  LargestCount();
  Concurrent();
  return check::Finish("task_claims");
}
