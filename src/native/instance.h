// Per-environment state: the one thread-safe function through which workers hand finished
// operations (and progress) back to the JS thread, and the live operations with their JS sides,
// so that environment teardown can cancel them and wait for their tasks instead of crashing.
#pragma once
#include <napi.h>

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>

#include "io_op.h"
#include "js_settlement.h"

namespace penstock {

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

class Instance final : public OperationListener {
 public:
  explicit Instance(Napi::Env env);
  static Instance* Get(Napi::Env env);

  // Main thread: `op` is live with its JS side until it settles; then starts it.
  void Start(Napi::Env env, std::shared_ptr<Operation> op, std::unique_ptr<JsSettlement> js);
  size_t Inflight();

  // OperationListener (any thread).
  bool Progressed(const std::shared_ptr<Operation>& op) override;
  void Drained(const std::shared_ptr<Operation>& op) override;

  void Teardown();
  // Cancels this environment's operations (any thread).
  void CancelAll();

 private:
  struct Live {
    std::shared_ptr<Operation> op;
    std::unique_ptr<JsSettlement> js;
  };
  static void Deliver(Napi::Env env, Napi::Function, std::nullptr_t*, Event* event);
  using Tsfn = Napi::TypedThreadSafeFunction<std::nullptr_t, Event, Deliver>;
  bool Post(std::shared_ptr<Operation> op, bool done);
  // Main thread: the JS side of a live operation (null once settled).
  JsSettlement* JsOf(const Operation* op);
  void Settle(Napi::Env env, const std::shared_ptr<Operation>& op);

  Tsfn tsfn_;
  std::mutex mutex_;
  std::condition_variable drained_;
  std::map<const Operation*, Live> live_;
  size_t running_ = 0;  // operations whose tasks have not all finished
};

}  // namespace penstock
