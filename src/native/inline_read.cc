// A small read done on the calling thread when the page cache holds it: one preadv2 with
// RWF_NOWAIT, which never waits for the disk (it fails with EAGAIN instead). TypeScript decides
// when to try it and falls back to the pool when it does not move every byte.
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>

#include "host_view.h"
#include "inline_read.h"

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
  struct iovec iov = {view.data + at, static_cast<size_t>(size)};
  ssize_t r;
  do {
    r = preadv2(fd, &iov, 1, static_cast<off_t>(fileOffset), RWF_NOWAIT);
  } while (r < 0 && errno == EINTR);
  return Napi::Number::New(env, r < 0 ? -static_cast<double>(errno) : static_cast<double>(r));
}

}  // namespace

void RegisterInlineRead(Napi::Env env, Napi::Object exports) {
  exports.Set("readCached", Napi::Function::New(env, ReadCached));
}

}  // namespace penstock
