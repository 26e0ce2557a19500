// Strict conversion of the addon's arguments. TypeScript validates everything first; these
// checks are the last line, so that a wrong value from any caller becomes a typed error instead
// of undefined behaviour (a negative double cast to an unsigned size, a missing key read as 0).
#pragma once
#include <napi.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "sys/cuda_api.h"

namespace penstock {

// A byte count or offset: a number that is a non-negative integer of at most 2^53 - 1.
uint64_t ArgU64(const Napi::Value& v, const char* name);
// An int32 number in [lo, hi].
int ArgInt(const Napi::Value& v, const char* name, int lo, int hi);
bool ArgBool(const Napi::Value& v, const char* name);
std::string ArgString(const Napi::Value& v, const char* name);
// A device address: a bigint that fits 64 bits unsigned.
CUdeviceptr ArgPtr(const Napi::Value& v, const char* name);
// The i-th argument, which must be present.
Napi::Value Arg(const Napi::CallbackInfo& info, size_t i, const char* name);

// An operation spec object: every own key must be one of `known`; Require() throws for a missing
// one. Each value is read once, as the keys are checked: looking keys up by name again costs a
// string made and a property lookup per key, several times over, on every operation started.
class SpecReader {
 public:
  SpecReader(const Napi::Value& v, std::initializer_list<const char*> known);
  bool Has(const char* key) const;
  Napi::Value Require(const char* key) const;

 private:
  // The value of `key` (one of the known keys), or null when the spec does not have it.
  napi_value Find(const char* key) const;
  Napi::Object obj_;
  std::vector<const char*> known_;
  std::vector<napi_value> values_;  // by the index of the key in known_
};

// Where a host view's bytes are, from the engine's own record of the view (never from
// JS-visible properties, which a caller can shadow). ArrayBuffer, TypedArray or DataView.
struct HostSpan {
  char* data = nullptr;
  size_t length = 0;
};
HostSpan ArgHost(const Napi::Value& v, const char* name);

// A typed array whose elements are of `type`, from the engine's own record of it: where its
// elements are and how many.
std::pair<void*, size_t> ArgTypedArray(const Napi::Value& v, napi_typedarray_type type, const char* name);
template <typename T>
std::pair<T*, size_t> ArgTyped(const Napi::Value& v, napi_typedarray_type type, const char* name) {
  auto [data, count] = ArgTypedArray(v, type, name);
  return {static_cast<T*>(data), count};
}
// Throws unless [offset, offset + size) lies within `span`.
void CheckSpan(Napi::Env env, const HostSpan& span, uint64_t offset, uint64_t size, const char* name);

}  // namespace penstock
