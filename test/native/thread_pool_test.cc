// Unit checks of the pool's hand-offs (src/native/sys/thread_pool.cc): Submit wakes a sleeping worker
// only for tasks the spinning ones cannot take, so a skipped wake-up must never leave a task in
// the queue with every worker asleep. Bursts of tasks are submitted with pauses that let the
// spinners time out or not, and each burst must finish without any later submission.
#include <atomic>
#include <chrono>
#include <thread>

#include "../../src/native/sys/thread_pool.cc"
#include "check.h"

namespace {

using penstock::ThreadPool;
using Clock = std::chrono::steady_clock;

// Submits `n` tasks at once and waits up to 2 s for all of them; true when they all ran.
bool Burst(ThreadPool& pool, int n) {
  std::atomic<int> done{0};
  for (int i = 0; i < n; ++i) pool.Submit([&done] { done.fetch_add(1); });
  auto deadline = Clock::now() + std::chrono::seconds(2);
  while (done.load() < n && Clock::now() < deadline) std::this_thread::yield();
  return done.load() == n;
}

void Bursts(uint64_t spinNs, int spinners) {
  ThreadPool& pool = ThreadPool::Instance();
  pool.SetSpin(spinNs, spinners);
  const int pauses_us[] = {0, 5, 40, 300, 2000};
  bool allRan = true;
  for (int round = 0; round < 400 && allRan; ++round) {
    allRan = Burst(pool, 1 + round % 7);
    std::this_thread::sleep_for(std::chrono::microseconds(pauses_us[round % 5]));
  }
  EXPECT(allRan);
}

// Tasks that submit more tasks from a worker (as an operation's runners do) also all run.
void NestedSubmits() {
  ThreadPool& pool = ThreadPool::Instance();
  pool.SetSpin(50'000, 2);
  std::atomic<int> done{0};
  for (int i = 0; i < 8; ++i)
    pool.Submit([&pool, &done] {
      for (int j = 0; j < 8; ++j) pool.Submit([&done] { done.fetch_add(1); });
      done.fetch_add(1);
    });
  auto deadline = Clock::now() + std::chrono::seconds(2);
  while (done.load() < 72 && Clock::now() < deadline) std::this_thread::yield();
  EXPECT(done.load() == 72);
}

}  // namespace

int main() {
  ThreadPool::Instance().Resize(4);
  Bursts(0, 0);
  Bursts(50'000, 1);
  Bursts(200'000, 4);
  NestedSubmits();
  return check::Finish("thread_pool_test");
}
