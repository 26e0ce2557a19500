// A small read done on the calling thread when the page cache holds it: one preadv2 with
// RWF_NOWAIT, which never waits for the disk (it fails with EAGAIN instead), and for a GPU target
// one copy from the device's inline staging. TypeScript decides when to try it and falls back to
// the pool when it does not move every byte.
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>

#include "args.h"
#include "device.h"
#include "errors.h"
#include "host_view.h"
#include "inline_read.h"

namespace penstock {

namespace {

ssize_t PreadNoWait(int fd, char* data, uint64_t size, uint64_t fileOffset) {
  struct iovec iov = {data, static_cast<size_t>(size)};
  ssize_t r;
  do {
    r = preadv2(fd, &iov, 1, static_cast<off_t>(fileOffset), RWF_NOWAIT);
  } while (r < 0 && errno == EINTR);
  return r < 0 ? -errno : r;
}


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

// readCachedToDevice(fd, device, devicePtr, size, fileOffset, piece): `size` bytes (all of
// them), or -errno, or a short count. The read goes in pieces of `piece` bytes (planned in
// TypeScript), each copied to the GPU on the inline stream as soon as it is read, so the copies
// run under the later preads; all of them are waited for here before it returns, whatever the
// outcome, so nothing of it is in flight when the pool takes over a read it could not finish.
// Another thread using the device's inline staging gives -EBUSY: the pool then takes the read.
Napi::Value ReadCachedToDevice(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() != 6) ThrowBadArgument(env, "readCachedToDevice(fd, device, devicePtr, size, fileOffset, piece)");
  int fd = ArgInt(info[0], "fd", 0, INT32_MAX);
  int device = ArgInt(info[1], "device", 0, INT32_MAX);
  CUdeviceptr dst = ArgPtr(info[2], "devicePtr");
  uint64_t size = ReadCount(info[3], "size");
  uint64_t fileOffset = ReadCount(info[4], "fileOffset");
  uint64_t piece = ReadCount(info[5], "piece");
  if (piece == 0) ThrowBadArgument(env, "piece must be positive");
  DeviceState* d = PreparedDevice(device);
  if (!d) ThrowRecord(env, ErrorRecord::Misuse("ERR_PENSTOCK_INTERNAL", "device not prepared"));
  InlineStaging& in = d->inlineStaging;
  std::unique_lock<std::mutex> use(in.mutex, std::try_to_lock);
  if (!use.owns_lock()) return Napi::Number::New(env, -EBUSY);
  if (size == 0 || size > in.bytes) ThrowBadArgument(env, "size must be between 1 and the device's inline staging");
  ContextGuard guard(d->ctx);
  ssize_t got = 0;
  ErrorRecord e;
  bool issued = false;
  for (uint64_t at = 0; at < size && e.ok();) {
    uint64_t n = std::min(piece, size - at);
    ssize_t r = PreadNoWait(fd, in.buffer + at, n, fileOffset + at);
    if (r < 0) {
      got = r;
      break;
    }
    if (r > 0) {
      e = PENSTOCK_CUDA(MemcpyHtoDAsync, dst + at, in.buffer + at, static_cast<size_t>(r), in.stream);
      issued = issued || e.ok();
    }
    got += r;
    if (static_cast<uint64_t>(r) < n) break;  // not cached, or the end of the file: the pool reads it all
    at += n;
  }
  if (issued) {
    ErrorRecord waited = PENSTOCK_CUDA(StreamSynchronize, in.stream);
    if (e.ok()) e = waited;
  }
  if (!e.ok()) ThrowRecord(env, e);
  return Napi::Number::New(env, static_cast<double>(got));
}

}  // namespace

void RegisterInlineRead(Napi::Env env, Napi::Object exports) {
  exports.Set("readCached", Napi::Function::New(env, ReadCached));
  exports.Set("readCachedToDevice", Napi::Function::New(env, ReadCachedToDevice));
}

}  // namespace penstock
