#include "js/background_work.h"

#include "engine/live_operations.h"
#include "js/errors.h"

namespace penstock {

namespace {

class BackgroundWork final : public Napi::AsyncWorker {
 public:
  BackgroundWork(Napi::Env env, const char* name, std::function<ErrorRecord()> work)
      : Napi::AsyncWorker(env, name), deferred_(Napi::Promise::Deferred::New(env)), work_(std::move(work)) {}

  Napi::Promise Promise() const { return deferred_.Promise(); }

  // Counted while it runs, not while it waits in the queue: an exit that has begun finds nothing
  // to wait for from work that had not started, and that work then does not start.
  void Execute() override {
    if (!EnterBackgroundWork()) {
      error_ = ErrorRecord::Misuse("ERR_PENSTOCK_EXITING", "The process is exiting");
      return;
    }
    error_ = work_();
    LeaveBackgroundWork();
  }
  // A worker thread's environment torn down while this ran: opening a scope to settle the
  // Promise then fails, and nothing is left to tell. The work itself has finished.
  void OnWorkComplete(Napi::Env env, napi_status status) override {
    try {
      Napi::AsyncWorker::OnWorkComplete(env, status);
    } catch (const Napi::Error&) {
      // The base class deletes the worker last; a throw before that leaves it to us.
      Destroy();
    }
  }
  void OnOK() override {
    if (error_.ok()) deferred_.Resolve(Env().Undefined());
    else deferred_.Reject(ToJs(Env(), error_));
  }

 private:
  Napi::Promise::Deferred deferred_;
  std::function<ErrorRecord()> work_;
  ErrorRecord error_;
};

}  // namespace

Napi::Promise StartBackgroundWork(Napi::Env env, const char* name, std::function<ErrorRecord()> work) {
  auto* w = new BackgroundWork(env, name, std::move(work));  // deletes itself once settled
  Napi::Promise p = w->Promise();
  w->Queue();
  return p;
}

}  // namespace penstock
