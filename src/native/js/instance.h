// Per-environment state: the one thread-safe function through which workers hand finished
// operations (and progress) back to the JS thread, and the live operations with their JS sides,
// so that environment teardown can cancel them and wait for their tasks instead of crashing.
#pragma once
#include <napi.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "engine/io_op.h"
#include "js/js_settlement.h"

namespace penstock {

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

  // Main thread: `op` is live with its JS side until it settles; then starts it. Its id, for
  // the handle's `cancel`.
  uint64_t Start(Napi::Env env, std::shared_ptr<Operation> op, std::unique_ptr<JsSettlement> js);
  // Main thread: the one `cancel` function of every operation's handle: it cancels the live
  // operation whose id is the handle's `id` (a function made per operation cost microseconds
  // on every start, and more at the garbage collection of each).
  Napi::Function CancelFunction(Napi::Env env) { return cancel_.Value(); }
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
  static Napi::Value CancelJs(const Napi::CallbackInfo& info);
  static void Deliver(Napi::Env env, Napi::Function, std::nullptr_t*, Event* event);
  using Tsfn = Napi::TypedThreadSafeFunction<std::nullptr_t, Event, Deliver>;
  bool Post(std::shared_ptr<Operation> op, bool done);
  // Main thread: the JS side of a live operation (null once settled).
  JsSettlement* JsOf(const Operation* op);
  void Settle(Napi::Env env, const std::shared_ptr<Operation>& op);

  Tsfn tsfn_;
  std::mutex mutex_;
  std::condition_variable drained_;
  std::unordered_map<uint64_t, Live> live_;  // by the operation's id
  uint64_t nextId_ = 1;
  Napi::FunctionReference cancel_;
  size_t running_ = 0;  // operations whose tasks have not all finished
};

}  // namespace penstock
