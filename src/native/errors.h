// Failures as plain data, so worker threads can describe them without touching JS; the main
// thread turns a record into a JS object and TypeScript turns that into a typed error.
#pragma once
#include <napi.h>

#include <memory>
#include <string>

#include "cuda_api.h"

namespace penstock {

struct ErrorRecord {
  enum class Kind { None, Os, Cuda, CuFile, Penstock, Abort };
  Kind kind = Kind::None;
  std::string code;
  std::string message;
  int number = 0;  // errno, CUresult or cuFile code
  std::string syscall;

  bool ok() const { return kind == Kind::None; }
  static ErrorRecord Os(int err, const char* syscall);
  static ErrorRecord FromCuda(CUresult r, const char* call);
  static ErrorRecord FromCuFile(int code, const char* call);
  static ErrorRecord Misuse(const char* code, std::string message);
  static ErrorRecord Aborted();
};

std::string CuFileErrorName(int code);
Napi::Object ToJs(Napi::Env env, const ErrorRecord& e);

// Settles an operation's promise once: rejected as aborted when cancelled, with `error` when
// failed, else resolved with `result()`. The handle is taken first, so it is freed even when an
// environment going away refuses the settle (and throws).
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

inline ErrorRecord CudaCallRecord(CUresult r, const char* call) {
  return r == CUDA_SUCCESS ? ErrorRecord{} : ErrorRecord::FromCuda(r, call);
}

}  // namespace penstock

// Makes one driver call through its CudaApi slot and names a failure after that slot, so a record
// can only name the call that failed: PENSTOCK_CUDA(EventRecord, ev, stream) fails as
// "cuEventRecord". Gives an ErrorRecord, ok() on success.
#define PENSTOCK_CUDA(Fn, ...) ::penstock::CudaCallRecord(::penstock::Cuda().Fn(__VA_ARGS__), "cu" #Fn)

namespace penstock {

}  // namespace penstock
