#include "thread_pool.h"

#include <algorithm>
#include <chrono>

namespace penstock {

namespace {
thread_local int t_workerIndex = -1;
// A worker that just ran out of work watches the queue this long before sleeping: waking a
// sleeping thread costs more than a small read itself.
// Only a few workers watch at once: on a small machine, every idle worker spinning would take
// the cores the JS thread and the busy workers need.
constexpr auto kSpin = std::chrono::microseconds(50);
std::atomic<int> g_spinners{0};
int MaxSpinners() {
  static const int n = [] {
    unsigned cores = std::thread::hardware_concurrency();
    return static_cast<int>(std::max(1u, std::min(4u, cores / 4)));
  }();
  return n;
}
}

ThreadPool& ThreadPool::Instance() {
  static ThreadPool* pool = new ThreadPool();
  return *pool;
}

int ThreadPool::WorkerIndex() { return t_workerIndex; }

int ThreadPool::Size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<int>(workers_.size());
}

size_t ThreadPool::Queued() {
  std::lock_guard<std::mutex> lock(mutex_);
  return queue_.size();
}

void ThreadPool::Submit(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(task));
    queuedHint_.store(queue_.size(), std::memory_order_release);
  }
  wake_.notify_one();
}

void ThreadPool::Run(int index) {
  t_workerIndex = index;
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    if (queue_.empty()) {
      if (idleHook_) {
        ++running_;
        lock.unlock();
        idleHook_();
        lock.lock();
        --running_;
        if (!queue_.empty()) continue;
        if (running_ == 0) idle_.notify_all();
      }
      if (stopping_) break;
      if (g_spinners.fetch_add(1) < MaxSpinners()) {
        lock.unlock();
        auto until = std::chrono::steady_clock::now() + kSpin;
        while (queuedHint_.load(std::memory_order_acquire) == 0 && std::chrono::steady_clock::now() < until) {
#if defined(__x86_64__)
          __builtin_ia32_pause();
#endif
        }
        lock.lock();
      }
      g_spinners.fetch_sub(1);
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      continue;
    }
    auto task = std::move(queue_.front());
    queue_.pop_front();
    queuedHint_.store(queue_.size(), std::memory_order_release);
    ++running_;
    lock.unlock();
    task();
    lock.lock();
    --running_;
    if (queue_.empty() && running_ == 0) idle_.notify_all();
  }
}

void ThreadPool::StopAll() {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    idle_.wait(lock, [&] { return queue_.empty() && running_ == 0; });
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
  workers_.clear();
  stopping_ = false;
}

void ThreadPool::Resize(int n) {
  if (n < 1) n = 1;
  if (!workers_.empty()) {
    if (static_cast<int>(workers_.size()) == n) return;
    StopAll();
  }
  workers_.reserve(n);
  for (int i = 0; i < n; ++i) workers_.emplace_back([this, i] { Run(i); });
}

}  // namespace penstock
