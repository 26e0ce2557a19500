#include "args.h"

#include <cmath>

#include "errors.h"

namespace penstock {

namespace {
[[noreturn]] void Bad(Napi::Env env, const std::string& message) {
  ThrowRecord(env, ErrorRecord::Misuse("ERR_PENSTOCK_INVALID_ARGUMENT", message));
}
constexpr double kMaxSafe = 9007199254740991.0;
}  // namespace

Napi::Value Arg(const Napi::CallbackInfo& info, size_t i, const char* name) {
  if (i >= info.Length()) Bad(info.Env(), std::string("missing argument ") + name);
  return info[i];
}

uint64_t ArgU64(const Napi::Value& v, const char* name) {
  if (!v.IsNumber()) Bad(v.Env(), std::string(name) + " must be a number");
  double d = v.As<Napi::Number>().DoubleValue();
  if (!std::isfinite(d) || d < 0 || d > kMaxSafe || std::floor(d) != d)
    Bad(v.Env(), std::string(name) + " must be a non-negative integer");
  return static_cast<uint64_t>(d);
}

int ArgInt(const Napi::Value& v, const char* name, int lo, int hi) {
  if (!v.IsNumber()) Bad(v.Env(), std::string(name) + " must be a number");
  double d = v.As<Napi::Number>().DoubleValue();
  if (!std::isfinite(d) || std::floor(d) != d || d < lo || d > hi)
    Bad(v.Env(), std::string(name) + " must be an integer from " + std::to_string(lo) + " to " + std::to_string(hi));
  return static_cast<int>(d);
}

bool ArgBool(const Napi::Value& v, const char* name) {
  if (!v.IsBoolean()) Bad(v.Env(), std::string(name) + " must be a boolean");
  return v.As<Napi::Boolean>().Value();
}

std::string ArgString(const Napi::Value& v, const char* name) {
  if (!v.IsString()) Bad(v.Env(), std::string(name) + " must be a string");
  return v.As<Napi::String>().Utf8Value();
}

CUdeviceptr ArgPtr(const Napi::Value& v, const char* name) {
  if (!v.IsBigInt()) Bad(v.Env(), std::string(name) + " must be a bigint");
  bool lossless = false;
  uint64_t p = v.As<Napi::BigInt>().Uint64Value(&lossless);
  if (!lossless) Bad(v.Env(), std::string(name) + " must be a bigint from 0 to 2^64 - 1");
  return p;
}

SpecReader::SpecReader(const Napi::Value& v, std::initializer_list<const char*> known) {
  if (!v.IsObject() || v.IsArray() || v.IsFunction()) Bad(v.Env(), "the operation spec must be an object");
  obj_ = v.As<Napi::Object>();
  Napi::Array keys = obj_.GetPropertyNames();
  for (uint32_t i = 0; i < keys.Length(); ++i) {
    std::string k = keys.Get(i).ToString().Utf8Value();
    bool ok = false;
    for (const char* name : known) ok = ok || k == name;
    if (!ok) Bad(v.Env(), "unknown key in the operation spec: " + k);
  }
}

bool SpecReader::Has(const char* key) const {
  return obj_.HasOwnProperty(key) && !obj_.Get(key).IsUndefined();
}

Napi::Value SpecReader::Require(const char* key) const {
  if (!Has(key)) Bad(obj_.Env(), std::string("the operation spec lacks ") + key);
  return obj_.Get(key);
}

HostSpan ArgHost(const Napi::Value& v, const char* name) {
  napi_env env = v.Env();
  HostSpan s;
  void* data = nullptr;
  bool is = false;
  if (napi_is_typedarray(env, v, &is) == napi_ok && is) {
    napi_typedarray_type type;
    size_t count = 0;
    if (napi_get_typedarray_info(env, v, &type, &count, &data, nullptr, nullptr) != napi_ok)
      Bad(v.Env(), std::string(name) + ": the engine gave no typed array info");
    size_t unit = 1;
    switch (type) {
      case napi_int16_array: case napi_uint16_array: unit = 2; break;
      case napi_int32_array: case napi_uint32_array: case napi_float32_array: unit = 4; break;
      case napi_float64_array: case napi_bigint64_array: case napi_biguint64_array: unit = 8; break;
      default: unit = 1;
    }
    s.data = static_cast<char*>(data);
    s.length = count * unit;
    return s;
  }
  if (napi_is_dataview(env, v, &is) == napi_ok && is) {
    size_t length = 0;
    if (napi_get_dataview_info(env, v, &length, &data, nullptr, nullptr) != napi_ok)
      Bad(v.Env(), std::string(name) + ": the engine gave no DataView info");
    s.data = static_cast<char*>(data);
    s.length = length;
    return s;
  }
  if (v.IsArrayBuffer()) {
    size_t length = 0;
    if (napi_get_arraybuffer_info(env, v, &data, &length) != napi_ok)
      Bad(v.Env(), std::string(name) + ": the engine gave no ArrayBuffer info");
    s.data = static_cast<char*>(data);
    s.length = length;
    return s;
  }
  Bad(v.Env(), std::string(name) + " must be an ArrayBuffer, a TypedArray or a DataView");
}

void CheckSpan(Napi::Env env, const HostSpan& span, uint64_t offset, uint64_t size, const char* name) {
  if (offset > span.length || size > span.length - offset || (size > 0 && span.data == nullptr))
    ThrowRecord(env, ErrorRecord::Misuse("ERR_PENSTOCK_OUT_OF_RANGE",
                                         std::string("The range [") + std::to_string(offset) + ", " +
                                             std::to_string(offset + size) + ") lies outside the " + name +
                                             " of " + std::to_string(span.length) + " bytes"));
}

std::pair<void*, size_t> ArgTypedArray(const Napi::Value& v, napi_typedarray_type type, const char* name) {
  bool is = false;
  if (napi_is_typedarray(v.Env(), v, &is) != napi_ok || !is) Bad(v.Env(), std::string(name) + " must be a typed array");
  napi_typedarray_type got;
  size_t count = 0, offset = 0;
  void* data = nullptr;
  napi_value buffer;
  if (napi_get_typedarray_info(v.Env(), v, &got, &count, &data, &buffer, &offset) != napi_ok || got != type)
    Bad(v.Env(), std::string(name) + " has the wrong element type");
  return {data, count};
}

}  // namespace penstock
