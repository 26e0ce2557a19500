#include "js/js_settlement.h"

namespace penstock {

JsSettlement::JsSettlement(Napi::Env env, Napi::Value keep, Napi::Value progress)
    : deferred_(new Napi::Promise::Deferred(env)) {
  if (keep.IsObject()) keep_ = Napi::Persistent(keep.As<Napi::Object>());
  if (progress.IsFunction()) progress_ = Napi::Persistent(progress.As<Napi::Function>());
}

JsSettlement::~JsSettlement() { delete deferred_; }

void JsSettlement::Progress(Napi::Env env, uint64_t bytesDone) {
  if (progress_.IsEmpty() || bytesDone == lastProgress_) return;
  lastProgress_ = bytesDone;
  try {
    progress_.Call({Napi::Number::New(env, static_cast<double>(bytesDone))});
  } catch (const Napi::Error&) {
    // A throwing progress callback must not break the operation; TypeScript wraps callbacks so
    // their errors surface to the user there.
  }
}

void JsSettlement::Abandon() {
  keep_.SuppressDestruct();
  progress_.SuppressDestruct();
  delete deferred_;
  deferred_ = nullptr;
}

}  // namespace penstock
