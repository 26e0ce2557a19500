#include "thread_pool.h"

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
  }
  wake_.notify_one();
}

void ThreadPool::Run(int index) {
  t_workerIndex = index;
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) break;  // stopping and drained
    auto task = std::move(queue_.front());
    queue_.pop_front();
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
