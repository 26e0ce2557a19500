// Argument readers of the small-read and batched-read calls, on top of the strict checks in
// args.h (host memory from the engine's own record of a view, counts that are non-negative
// integers), so both calls name their arguments the same way the other bindings do.
#pragma once
#include <napi.h>

#include <cstdint>
#include <string>

#include "js/args.h"
#include "js/errors.h"

namespace penstock {

using HostView = HostSpan;

[[noreturn]] inline void ThrowBadArgument(Napi::Env env, const std::string& what) {
  ThrowRecord(env, ErrorRecord::Misuse("ERR_PENSTOCK_INVALID_ARGUMENT", what));
}

// A TypedArray, DataView, ArrayBuffer or SharedArrayBuffer view.
inline HostView ReadHostView(const Napi::Value& v, const char* name) { return ArgHost(v, name); }

// A byte count or offset: a number holding a non-negative integer below 2^53.
inline uint64_t ReadCount(const Napi::Value& v, const char* name) { return ArgU64(v, name); }

}  // namespace penstock
