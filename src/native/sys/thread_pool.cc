#include "sys/thread_pool.h"

#include <algorithm>
#include <chrono>

namespace penstock {

namespace {
thread_local int t_workerIndex = -1;
}

ThreadPool& ThreadPool::Instance() {
  static ThreadPool* pool = new ThreadPool();
  return *pool;
}

int ThreadPool::WorkerIndex() { return t_workerIndex; }

int ThreadPool::Size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return target_;
}

void ThreadPool::Submit(std::function<void()> task) {
  bool wake;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(task));
    queuedHint_.store(queue_.size(), std::memory_order_seq_cst);
    // A spinning worker counted here has not yet taken the lock to look at the queue before
    // sleeping (it leaves the count first), so it will see this task: one per queued task.
    wake = static_cast<size_t>(spinning_.load(std::memory_order_seq_cst)) < queue_.size();
  }
  if (wake) wake_.notify_one();
}

void ThreadPool::Run(int index) {
  t_workerIndex = index;
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    if (queue_.empty() || index >= target_) {
      // Before sleeping or leaving, finish what this worker deferred (copies in flight).
      if (idleHook_) {
        lock.unlock();
        idleHook_();
        lock.lock();
      }
      if (index >= target_) {
        alive_[index] = false;
        return;
      }
      if (!queue_.empty()) continue;
      if (spinners_.fetch_add(1) < maxSpinners_.load(std::memory_order_relaxed)) {
        spinning_.fetch_add(1, std::memory_order_seq_cst);
        lock.unlock();
        auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(spinNs_.load(std::memory_order_relaxed));
        while (queuedHint_.load(std::memory_order_seq_cst) == 0 && std::chrono::steady_clock::now() < until) {
#if defined(__x86_64__)
          __builtin_ia32_pause();
#endif
        }
        spinning_.fetch_sub(1, std::memory_order_seq_cst);
        lock.lock();
      }
      spinners_.fetch_sub(1);
      wake_.wait(lock, [&] { return index >= target_ || !queue_.empty(); });
      continue;
    }
    auto task = std::move(queue_.front());
    queue_.pop_front();
    queuedHint_.store(queue_.size(), std::memory_order_release);
    lock.unlock();
    task();
    lock.lock();
  }
}

void ThreadPool::Resize(int n) {
  std::lock_guard<std::mutex> lock(mutex_);
  n = std::max(1, n);
  target_ = n;
  if (static_cast<int>(workers_.size()) < n) {
    workers_.resize(n);
    alive_.resize(n, false);
  }
  for (int i = 0; i < n; ++i) {
    if (alive_[i]) continue;  // running, or told to leave and not gone yet: it stays
    alive_[i] = true;
    std::thread old = std::move(workers_[i]);
    // A worker that left has returned from Run() (or is about to): the new one joins it first,
    // on its own thread, so no JS thread ever waits here.
    workers_[i] = std::thread([this, i, old = std::move(old)]() mutable {
      if (old.joinable()) old.join();
      Run(i);
    });
  }
  wake_.notify_all();
}

}  // namespace penstock
