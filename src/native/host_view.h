// Strict readers for the arguments of the small-read and batched-read calls: host memory from
// the engine's own record of a view (never from JS-visible properties), and numbers that must be
// non-negative integers. A wrong value becomes a typed error, never undefined behaviour.
#pragma once
#include <napi.h>

#include <cmath>
#include <cstdint>

#include "errors.h"

namespace penstock {

struct HostView {
  char* data = nullptr;
  size_t length = 0;
};

[[noreturn]] inline void ThrowBadArgument(Napi::Env env, const std::string& what) {
  ThrowRecord(env, ErrorRecord::Misuse("ERR_PENSTOCK_INVALID_ARGUMENT", what));
}

// A TypedArray, DataView, ArrayBuffer or SharedArrayBuffer.
inline HostView ReadHostView(const Napi::Value& v, const char* name) {
  napi_env env = v.Env();
  HostView h;
  bool is = false;
  void* data = nullptr;
  size_t length = 0;
  if (napi_is_typedarray(env, v, &is) == napi_ok && is) {
    napi_typedarray_type type;
    size_t count = 0, offset = 0;
    napi_value ab;
    if (napi_get_typedarray_info(env, v, &type, &count, &data, &ab, &offset) != napi_ok) ThrowBadArgument(v.Env(), name);
    size_t bytes = 1;
    switch (type) {
      case napi_int16_array: case napi_uint16_array: bytes = 2; break;
      case napi_int32_array: case napi_uint32_array: case napi_float32_array: bytes = 4; break;
      case napi_float64_array: case napi_bigint64_array: case napi_biguint64_array: bytes = 8; break;
      default: bytes = 1;
    }
    length = count * bytes;
  } else if (napi_is_dataview(env, v, &is) == napi_ok && is) {
    napi_value ab;
    size_t offset = 0;
    if (napi_get_dataview_info(env, v, &length, &data, &ab, &offset) != napi_ok) ThrowBadArgument(v.Env(), name);
  } else if (napi_get_arraybuffer_info(env, v, &data, &length) != napi_ok) {
    ThrowBadArgument(v.Env(), std::string(name) + " must be host memory (an ArrayBuffer or a view)");
  }
  h.data = static_cast<char*>(data);
  h.length = length;
  return h;
}

// A byte count or offset: a number holding a non-negative integer below 2^53.
inline uint64_t ReadCount(const Napi::Value& v, const char* name) {
  if (!v.IsNumber()) ThrowBadArgument(v.Env(), std::string(name) + " must be a number");
  double d = v.As<Napi::Number>().DoubleValue();
  if (!(d >= 0) || d > 9007199254740991.0 || std::floor(d) != d)
    ThrowBadArgument(v.Env(), std::string(name) + " must be a non-negative integer");
  return static_cast<uint64_t>(d);
}

}  // namespace penstock
