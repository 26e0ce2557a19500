// The JS side of one operation or batch, kept on the main thread: its promise, the JS value that
// keeps the memory its tasks use alive, and its progress callback. Engine objects never hold
// these; the bindings settle them from what the engine reports.
#pragma once
#include <napi.h>

#include <cstdint>

#include "js/errors.h"

namespace penstock {

class JsSettlement {
 public:
  // `keep`: referenced until settled when it is an object; `progress`: called when a function.
  JsSettlement(Napi::Env env, Napi::Value keep, Napi::Value progress);
  ~JsSettlement();
  JsSettlement(const JsSettlement&) = delete;
  JsSettlement& operator=(const JsSettlement&) = delete;

  Napi::Promise Promise() const { return deferred_->Promise(); }
  // Calls the progress callback with `bytesDone` when it has moved since the last call.
  void Progress(Napi::Env env, uint64_t bytesDone);
  // The last progress, then the one settle convention (SettlePromise), then the references go.
  template <typename Result>
  void Settle(Napi::Env env, uint64_t bytesDone, bool cancelled, bool failed, const ErrorRecord& error, Result result) {
    if (!progress_.IsEmpty()) Progress(env, bytesDone);
    if (!deferred_) return;
    SettlePromise(env, deferred_, cancelled, failed, error, result);
    keep_.Reset();
    progress_.Reset();
  }
  // Environment teardown: forgets the handles without touching the dying environment (the
  // promise itself cannot be settled there; only its C++ handle is freed).
  void Abandon();

 private:
  Napi::Promise::Deferred* deferred_;
  Napi::ObjectReference keep_;
  Napi::FunctionReference progress_;
  uint64_t lastProgress_ = 0;
};

}  // namespace penstock
