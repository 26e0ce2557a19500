// The JS face of reads on the calling thread (engine/inline_read.h): strict arguments, and the
// engine's answer as a number (bytes, a short count, or -errno) or a thrown error.
#include <cerrno>
#include <climits>

#include "engine/inline_read.h"
#include "js/args.h"
#include "js/bindings.h"
#include "js/errors.h"
#include "js/host_view.h"

namespace penstock {

namespace {

// readCached(fd, view, viewOffset, size, fileOffset): bytes read (possibly short), or -errno.
// Holds no lock and allocates nothing, so it costs one system call and the copy.
Napi::Value ReadCached(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() != 5 || !info[0].IsNumber()) ThrowBadArgument(env, "readCached(fd, view, viewOffset, size, fileOffset)");
  int fd = info[0].As<Napi::Number>().Int32Value();
  HostView view = ReadHostView(info[1], "view");
  uint64_t at = ReadCount(info[2], "viewOffset");
  uint64_t size = ReadCount(info[3], "size");
  uint64_t fileOffset = ReadCount(info[4], "fileOffset");
  if (at > view.length || size > view.length - at) ThrowBadArgument(env, "the range lies outside the view");
  return Napi::Number::New(env, static_cast<double>(PreadNoWait(fd, view.data + at, size, fileOffset)));
}

// readCachedToDevice(fd, device, devicePtr, size, fileOffset, piece, helpers, scratch, report):
// see ReadCachedToDevice; report[0] is set to the pieces that helpers read.
Napi::Value ReadCachedToDeviceJs(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() != 9)
    ThrowBadArgument(env, "readCachedToDevice(fd, device, devicePtr, size, fileOffset, piece, helpers, scratch, report)");
  CachedDeviceRead r;
  r.fd = ArgInt(info[0], "fd", 0, INT32_MAX);
  r.device = ArgInt(info[1], "device", 0, INT32_MAX);
  r.dst = ArgPtr(info[2], "devicePtr");
  r.size = ReadCount(info[3], "size");
  r.fileOffset = ReadCount(info[4], "fileOffset");
  r.piece = ReadCount(info[5], "piece");
  r.helpers = ArgInt(info[6], "helpers", 0, kMaxCachedHelpers);
  r.throughScratch = ArgBool(info[7], "scratch");
  auto [report, reportLength] = ArgTyped<uint32_t>(info[8], napi_uint32_array, "report");
  if (reportLength < 1) ThrowBadArgument(env, "report must be a Uint32Array of at least one element");
  int64_t result = 0;
  uint32_t helped = 0;
  ErrorRecord e = ReadCachedToDevice(r, &result, &helped);
  report[0] = helped;
  ThrowIfError(env, e);
  return Napi::Number::New(env, static_cast<double>(result));
}

}  // namespace

void RegisterInlineRead(Napi::Env env, Napi::Object exports) {
  exports.Set("readCached", Napi::Function::New(env, ReadCached));
  exports.Set("readCachedToDevice", Napi::Function::New(env, ReadCachedToDeviceJs));
}

}  // namespace penstock
