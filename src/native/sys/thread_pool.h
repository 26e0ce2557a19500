// penstock's own I/O threads. Blocking preads and copy waits must not sit on libuv's four shared
// threads (fs, dns, zlib and crypto queue behind them), so every task runs here.
#pragma once
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace penstock {

class ThreadPool {
 public:
  // The process-wide pool. Never destroyed: joining threads from static destructors at exit is
  // how native addons crash on shutdown.
  static ThreadPool& Instance();

  // Sets the pool to n workers without waiting for anything: missing workers start, workers
  // past n leave once their current task is done (a worker index is never run twice at once).
  void Resize(int n);
  int Size() const;
  void Submit(std::function<void()> task);
  // A worker that runs out of work watches the queue for `ns` before it sleeps, at most
  // `spinners` workers at once (0: none). Waking a sleeping thread can cost more than a small
  // read; watching costs a core. TypeScript decides both (transfer-plan.ts).
  void SetSpin(uint64_t ns, int spinners) {
    spinNs_.store(ns, std::memory_order_relaxed);
    maxSpinners_.store(spinners, std::memory_order_relaxed);
  }

  // Index of the calling worker in [0, Size()), or -1 off the pool.
  static int WorkerIndex();

  // Called on a worker whenever it finds the queue empty, before it sleeps: work a worker
  // deferred (copies still in flight) is finished there, never left waiting for a next task.
  void SetIdleHook(void (*hook)()) { idleHook_ = hook; }

 private:
  ThreadPool() = default;
  void Run(int index);

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> queue_;
  std::vector<std::thread> workers_;  // by index; a left worker's thread stays here to be joined
  std::vector<bool> alive_;           // whether index i has a thread in Run()
  int target_ = 0;
  // Mirrors queue_.size() so idle workers can spin on it without the lock.
  std::atomic<size_t> queuedHint_{0};
  std::atomic<uint64_t> spinNs_{0};
  std::atomic<int> maxSpinners_{0};
  std::atomic<int> spinners_{0};
  // Workers inside the spin loop now: awake, idle, and bound to look at the queue under the lock
  // before they sleep. Submit wakes a sleeper only for work they cannot all take: waking a thread
  // (a futex call and, in a VM, an interrupt to another CPU) costs the submitting thread more than
  // a small read.
  std::atomic<int> spinning_{0};
  void (*idleHook_)() = nullptr;
};

}  // namespace penstock
