#include "js/args.h"

#include <cmath>
#include <cstring>

#include "js/errors.h"

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

SpecReader::SpecReader(const Napi::Value& v, std::initializer_list<const char*> known) : known_(known) {
  if (!v.IsObject() || v.IsArray() || v.IsFunction()) Bad(v.Env(), "the operation spec must be an object");
  napi_env env = v.Env();
  obj_ = v.As<Napi::Object>();
  values_.assign(known_.size(), nullptr);
  napi_value keys;
  uint32_t count = 0;
  if (napi_get_all_property_names(env, obj_, napi_key_own_only,
                                  static_cast<napi_key_filter>(napi_key_enumerable | napi_key_skip_symbols),
                                  napi_key_numbers_to_strings, &keys) != napi_ok ||
      napi_get_array_length(env, keys, &count) != napi_ok)
    Bad(v.Env(), "the operation spec's keys could not be read");
  for (uint32_t i = 0; i < count; ++i) {
    napi_value key;
    // Every known key is short: a longer one is unknown, whatever follows.
    char name[64];
    size_t len = 0;
    if (napi_get_element(env, keys, i, &key) != napi_ok ||
        napi_get_value_string_utf8(env, key, name, sizeof name, &len) != napi_ok)
      Bad(v.Env(), "the operation spec's keys could not be read");
    size_t at = 0;
    while (at < known_.size() && std::strcmp(known_[at], name) != 0) ++at;
    if (at == known_.size() || len + 1 >= sizeof name)
      Bad(v.Env(), "unknown key in the operation spec: " + Napi::Value(env, key).ToString().Utf8Value());
    if (napi_get_property(env, obj_, key, &values_[at]) != napi_ok) Bad(v.Env(), std::string("the operation spec's ") + name + " could not be read");
  }
}

napi_value SpecReader::Find(const char* key) const {
  for (size_t i = 0; i < known_.size(); ++i)
    if (std::strcmp(known_[i], key) == 0) return values_[i];
  return nullptr;
}

bool SpecReader::Has(const char* key) const {
  napi_value v = Find(key);
  return v && !Napi::Value(obj_.Env(), v).IsUndefined();
}

Napi::Value SpecReader::Require(const char* key) const {
  napi_value v = Find(key);
  if (!v || Napi::Value(obj_.Env(), v).IsUndefined()) Bad(obj_.Env(), std::string("the operation spec lacks ") + key);
  return Napi::Value(obj_.Env(), v);
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
