// The pool, and the facts of files that the plan samples; submit() itself is file_specs.cc.
#include <mutex>

#include "js/args.h"
#include "js/bindings.h"
#include "sys/cufile_api.h"
#include "engine/device.h"
#include "js/instance.h"
#include "sys/posix_io.h"
#include "engine/staging_pipe.h"
#include "sys/thread_pool.h"

namespace penstock {

std::mutex& PoolMutex() {
  static auto* m = new std::mutex();
  return *m;
}

Napi::Value FromPtr(Napi::Env env, uint64_t p) { return Napi::BigInt::New(env, p); }

namespace {

Napi::Value SetThreads(const Napi::CallbackInfo& info) {
  int n = ArgInt(Arg(info, 0, "threads"), "threads", 1, kMaxWorkers);
  uint64_t spinNs = ArgU64(Arg(info, 1, "spinNs"), "spinNs");
  int spinners = ArgInt(Arg(info, 2, "spinners"), "spinners", 0, kMaxWorkers);
  std::lock_guard<std::mutex> lock(PoolMutex());
  ThreadPool::Instance().SetSpin(spinNs, spinners);
  // Slots first: a new worker may pick up a staged task of another environment at once.
  ErrorRecord e = GrowPreparedDevices(n);
  if (!e.ok()) ThrowRecord(info.Env(), e);
  ThreadPool::Instance().Resize(n);
  return info.Env().Undefined();
}

Napi::Value PoolInfo(const Napi::CallbackInfo& info) {
  Napi::Object o = Napi::Object::New(info.Env());
  o.Set("threads", ThreadPool::Instance().Size());
  return o;
}

Napi::Value ResidencyJs(const Napi::CallbackInfo& info) {
  int fd = ArgInt(Arg(info, 0, "fd"), "fd", 0, INT32_MAX);
  uint64_t offset = ArgU64(Arg(info, 1, "offset"), "offset");
  uint64_t length = ArgU64(Arg(info, 2, "length"), "length");
  int samples = ArgInt(Arg(info, 3, "samples"), "samples", 1, 1 << 20);
  return Napi::Number::New(info.Env(), Residency(fd, offset, length, samples));
}

Napi::Value DropCacheJs(const Napi::CallbackInfo& info) {
  int e = DropCache(ArgInt(Arg(info, 0, "fd"), "fd", 0, INT32_MAX));
  if (e) ThrowRecord(info.Env(), ErrorRecord::Os(e, "posix_fadvise"));
  return info.Env().Undefined();
}

// Who is at the other end of a Unix socket: the daemon decides from it whether to serve the peer.
Napi::Value PeerCredentialsJs(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int64_t pid = 0, uid = 0, gid = 0;
  int e = PeerCredentials(ArgInt(Arg(info, 0, "fd"), "fd", 0, INT32_MAX), &pid, &uid, &gid);
  if (e) ThrowRecord(env, ErrorRecord::Os(e, "getsockopt"));
  Napi::Object out = Napi::Object::New(env);
  out.Set("pid", Napi::Number::New(env, static_cast<double>(pid)));
  out.Set("uid", Napi::Number::New(env, static_cast<double>(uid)));
  out.Set("gid", Napi::Number::New(env, static_cast<double>(gid)));
  return out;
}

Napi::Value Inflight(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), static_cast<double>(Instance::Get(info.Env())->Inflight()));
}

}  // namespace

void RegisterIo(Napi::Env env, Napi::Object exports) {
  exports.Set("setThreads", Napi::Function::New(env, SetThreads));
  exports.Set("poolInfo", Napi::Function::New(env, PoolInfo));
  exports.Set("submit", Napi::Function::New(env, SubmitTransfer));
  exports.Set("inflight", Napi::Function::New(env, Inflight));
  exports.Set("residency", Napi::Function::New(env, ResidencyJs));
  exports.Set("dropCache", Napi::Function::New(env, DropCacheJs));
  exports.Set("peerCredentials", Napi::Function::New(env, PeerCredentialsJs));
}

}  // namespace penstock
