// Per-environment state: the one thread-safe function through which workers hand finished
// operations (and progress) back to the JS thread, and the set of live operations so that
// environment teardown can cancel them and wait for their tasks instead of crashing.
#pragma once
#include <napi.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <set>

namespace penstock {

class Operation;

// Operations of every environment whose tasks have not all finished.
int LiveOperations();
// From the first call on, the process's exit first cancels every environment's operations and
// waits for their running tasks, before exit handlers registered earlier (the CUDA driver's
// among them, when this runs after it is loaded) tear anything down.
void DrainAtExit();

struct Event {
  std::shared_ptr<Operation> op;
  bool done;  // false: progress
};

class Instance {
 public:
  explicit Instance(Napi::Env env);
  static Instance* Get(Napi::Env env);

  // Main thread.
  void Begin(Napi::Env env, std::shared_ptr<Operation> op);
  void Finish(Napi::Env env, const std::shared_ptr<Operation>& op);
  size_t Inflight();

  // Any thread. Returns false when the environment is going away.
  bool Post(std::shared_ptr<Operation> op, bool done);
  // Worker side of an operation's last task.
  void TasksDrained(const std::shared_ptr<Operation>& op);

  void Teardown();
  // Cancels this environment's operations (any thread).
  void CancelAll();

 private:
  static void Deliver(Napi::Env env, Napi::Function, std::nullptr_t*, Event* event);
  using Tsfn = Napi::TypedThreadSafeFunction<std::nullptr_t, Event, Deliver>;
  Tsfn tsfn_;
  std::mutex mutex_;
  std::condition_variable drained_;
  std::set<std::shared_ptr<Operation>> live_;
  size_t running_ = 0;  // operations whose tasks have not all finished
};

}  // namespace penstock
