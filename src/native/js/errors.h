// Error records on the JS side: a record as a JS object (which errors.ts turns into a typed
// error), thrown, or settling a promise.
#pragma once
#include <napi.h>

#include <memory>

#include "sys/error_record.h"

namespace penstock {

Napi::Object ToJs(Napi::Env env, const ErrorRecord& e);

// Settles an operation's or a batch's promise once: rejected as aborted when cancelled, with
// `error` when failed, else resolved with `result()`. The handle is taken first, so it is freed
// even when an environment going away refuses the settle (and throws).
template <typename Result>
void SettlePromise(Napi::Env env, Napi::Promise::Deferred*& deferred, bool cancelled, bool failed, const ErrorRecord& error,
                   Result result) {
  std::unique_ptr<Napi::Promise::Deferred> settle(deferred);
  deferred = nullptr;
  if (cancelled)
    settle->Reject(ToJs(env, ErrorRecord::Aborted()));
  else if (failed)
    settle->Reject(ToJs(env, error));
  else
    settle->Resolve(result());
}
// Throws the record as a JS exception carrying a `record` property that errors.ts understands.
[[noreturn]] void ThrowRecord(Napi::Env env, const ErrorRecord& e);

inline void ThrowIfError(Napi::Env env, const ErrorRecord& e) {
  if (!e.ok()) ThrowRecord(env, e);
}

}  // namespace penstock
