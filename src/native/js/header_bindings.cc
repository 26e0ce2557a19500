// scanSafetensorsHeader(bytes): a header in the plain form as columns (engine/header_scan.h),
// or null. Columns rather than an object per tensor: making 15 000 objects through Node-API
// costs more than the scan itself, and the caller builds its own objects once anyway.
#include <string>

#include "engine/header_scan.h"
#include "js/args.h"
#include "js/bindings.h"

namespace penstock {

namespace {

// Names joined by '\n' (which no name in the plain form holds), in strings of about kNameChunk
// bytes: one string of a large header's names would be a large object of its own, in memory
// mapped afresh on every scan.
constexpr size_t kNameChunk = 64 * 1024;

Napi::Array NameChunks(Napi::Env env, const HostSpan& bytes, const HeaderScan& scan) {
  Napi::Array chunks = Napi::Array::New(env);
  std::string joined;
  joined.reserve(kNameChunk + 256);
  auto flush = [&] {
    napi_value s;
    napi_status st = scan.ascii ? napi_create_string_latin1(env, joined.data(), joined.size(), &s)
                                : napi_create_string_utf8(env, joined.data(), joined.size(), &s);
    NAPI_THROW_IF_FAILED_VOID(env, st);
    chunks.Set(chunks.Length(), Napi::Value(env, s));
    joined.clear();
  };
  for (size_t k = 0; k < scan.tensors.size(); ++k) {
    const ScannedTensor& t = scan.tensors[k];
    if (k && joined.size() + t.nameLength >= kNameChunk) flush();
    else if (k) joined.push_back('\n');
    joined.append(bytes.data + t.nameAt, t.nameLength);
  }
  if (!scan.tensors.empty()) flush();
  return chunks;
}

Napi::Value ScanHeader(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  HostSpan bytes = ArgHost(Arg(info, 0, "bytes"), "bytes");
  // Kept by the thread: a repeated load scans the same header into the same memory.
  thread_local HeaderScan scan;
  if (!ScanSafetensorsHeader(reinterpret_cast<const uint8_t*>(bytes.data), bytes.length, &scan)) return env.Null();
  const size_t n = scan.tensors.size();
  Napi::Array names = NameChunks(env, bytes, scan);

  Napi::Array dtypes = Napi::Array::New(env, scan.dtypes.size());
  for (uint32_t k = 0; k < scan.dtypes.size(); ++k)
    dtypes.Set(k, Napi::String::New(env, scan.dtypes[k].data(), scan.dtypes[k].size()));
  Napi::Uint32Array dtype = Napi::Uint32Array::New(env, n);
  Napi::Uint32Array rank = Napi::Uint32Array::New(env, n);
  Napi::Float64Array offsets = Napi::Float64Array::New(env, 2 * n);
  Napi::Float64Array dims = Napi::Float64Array::New(env, scan.dims.size());
  uint32_t* dtypeAt = dtype.Data();
  uint32_t* rankAt = rank.Data();
  double* offsetAt = offsets.Data();
  for (size_t k = 0; k < n; ++k) {
    const ScannedTensor& t = scan.tensors[k];
    dtypeAt[k] = t.dtype;
    rankAt[k] = t.rank;
    offsetAt[2 * k] = static_cast<double>(t.begin);
    offsetAt[2 * k + 1] = static_cast<double>(t.end);
  }
  double* dimAt = dims.Data();
  for (size_t k = 0; k < scan.dims.size(); ++k) dimAt[k] = static_cast<double>(scan.dims[k]);

  Napi::Object out = Napi::Object::New(env);
  out.Set("names", names);
  out.Set("count", Napi::Number::New(env, static_cast<double>(n)));
  out.Set("dtypes", dtypes);
  out.Set("dtype", dtype);
  out.Set("rank", rank);
  out.Set("dims", dims);
  out.Set("offsets", offsets);
  if (scan.hasMetadata) {
    out.Set("metadataAt", Napi::Number::New(env, static_cast<double>(scan.metadataAt)));
    out.Set("metadataLength", Napi::Number::New(env, static_cast<double>(scan.metadataLength)));
  }
  return out;
}

}  // namespace

void RegisterHeaders(Napi::Env env, Napi::Object exports) {
  exports.Set("scanSafetensorsHeader", Napi::Function::New(env, ScanHeader));
}

}  // namespace penstock
