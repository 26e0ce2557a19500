// penstock's own I/O threads. Blocking preads and copy waits must not sit on libuv's four shared
// threads (fs, dns, zlib and crypto queue behind them), so every task runs here.
#pragma once
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

  // Replaces the workers with n new ones; waits for queued work first.
  void Resize(int n);
  int Size() const;
  size_t Queued();
  void Submit(std::function<void()> task);

  // Index of the calling worker in [0, Size()), or -1 off the pool.
  static int WorkerIndex();

 private:
  ThreadPool() = default;
  void Run(int index);
  void StopAll();

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable idle_;
  std::deque<std::function<void()>> queue_;
  std::vector<std::thread> workers_;
  int running_ = 0;
  bool stopping_ = false;
};

}  // namespace penstock
