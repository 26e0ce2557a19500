#include "kept_pages.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>

#include <cerrno>
#include <map>
#include <mutex>

#include "args.h"
#include "bindings.h"
#include "device.h"
#include "direct_span.h"
#include "errors.h"
#include "io_op.h"
#include "thread_pool.h"

namespace penstock {

namespace {

// Never destroyed: read from any environment, and from workers, until the process is gone.
std::mutex& g_keptMutex = *new std::mutex();
std::map<uint32_t, std::shared_ptr<KeptSpan>>& g_kept = *new std::map<uint32_t, std::shared_ptr<KeptSpan>>();
uint64_t g_keptBytes = 0;

int64_t Ns(const struct timespec& t) { return static_cast<int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec; }

int64_t RealtimeNs() {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return Ns(t);
}

}  // namespace

ErrorRecord StampOf(int fd, FileStamp* out) {
  struct stat st;
  if (fstat(fd, &st) != 0) return ErrorRecord::Os(errno, "fstat");
  out->dev = st.st_dev;
  out->ino = st.st_ino;
  out->size = static_cast<uint64_t>(st.st_size);
  out->mtimeNs = Ns(st.st_mtim);
  out->ctimeNs = Ns(st.st_ctim);
  return {};
}

ErrorRecord KeptSpan::Create(int fd, uint64_t fileOffset, uint64_t length, const FileStamp& stamp,
                             std::shared_ptr<KeptSpan>* out) {
  const CudaApi& cu = Cuda();
  if (!cu.MemHostRegister || !cu.MemHostUnregister)
    return ErrorRecord::Misuse("ERR_PENSTOCK_MAPPED_UNAVAILABLE", "this CUDA driver has no cuMemHostRegister");
  std::shared_ptr<KeptSpan> s(new KeptSpan());
  s->first_ = fileOffset;
  s->end_ = fileOffset + length;
  s->mapStart_ = AlignDown(fileOffset);
  s->span_ = AlignUp(fileOffset + length) - s->mapStart_;
  s->stamp_ = stamp;
  void* m = mmap(nullptr, s->span_, PROT_READ, MAP_SHARED, fd, static_cast<off_t>(s->mapStart_));
  if (m == MAP_FAILED) return ErrorRecord::Os(errno, "mmap");
  s->map_ = m;
  // Portable: a copy into any GPU may read it, whichever context registered it.
  ErrorRecord e = PENSTOCK_CUDA(MemHostRegister, m, s->span_, CU_MEMHOSTREGISTER_READ_ONLY | CU_MEMHOSTREGISTER_PORTABLE);
  if (!e.ok()) return e;  // s unmaps as it goes
  s->registered_ = true;
  *out = std::move(s);
  return {};
}

KeptSpan::~KeptSpan() {
  if (registered_) Cuda().MemHostUnregister(map_);
  if (map_) munmap(map_, span_);
}

bool StoreKept(uint32_t id, std::shared_ptr<KeptSpan> span) {
  std::lock_guard<std::mutex> lock(g_keptMutex);
  uint64_t bytes = span->Bytes();
  if (!g_kept.emplace(id, std::move(span)).second) return false;
  g_keptBytes += bytes;
  return true;
}

std::shared_ptr<KeptSpan> FindKept(uint32_t id) {
  std::lock_guard<std::mutex> lock(g_keptMutex);
  auto it = g_kept.find(id);
  return it == g_kept.end() ? nullptr : it->second;
}

bool ReleaseKept(uint32_t id) {
  std::shared_ptr<KeptSpan> gone;  // unregistered outside the lock
  std::lock_guard<std::mutex> lock(g_keptMutex);
  auto it = g_kept.find(id);
  if (it == g_kept.end()) return false;
  gone = std::move(it->second);
  g_keptBytes -= gone->Bytes();
  g_kept.erase(it);
  return true;
}

uint64_t KeptBytes() {
  std::lock_guard<std::mutex> lock(g_keptMutex);
  return g_keptBytes;
}

ErrorRecord CheckedKept(uint32_t id, int fd, uint64_t fileOffset, uint64_t size, std::shared_ptr<KeptSpan>* out) {
  std::shared_ptr<KeptSpan> span = FindKept(id);
  if (!span) return ErrorRecord::Misuse("ERR_PENSTOCK_INTERNAL", "unknown kept span");
  if (!span->Covers(fileOffset, size)) return ErrorRecord::Misuse("ERR_PENSTOCK_INTERNAL", "the read is outside its kept span");
  FileStamp now;
  ErrorRecord e = StampOf(fd, &now);
  if (!e.ok()) return e;
  if (!(now == span->Stamp()))
    return ErrorRecord::Misuse("ERR_PENSTOCK_KEPT_STALE", "the file changed since its pages were registered");
  *out = std::move(span);
  return {};
}

ErrorRecord KeepRange(uint32_t id, int fd, uint64_t fileOffset, uint64_t size, uint64_t settleNs,
                      std::shared_ptr<KeptSpan>* out) {
  FileStamp now;
  ErrorRecord e = StampOf(fd, &now);
  if (!e.ok()) return e;
  // A change within the clock's coarse tick of the stamp could leave the times as they are.
  int64_t settled = RealtimeNs() - static_cast<int64_t>(settleNs);
  if (now.mtimeNs >= settled || now.ctimeNs >= settled)
    return ErrorRecord::Misuse("ERR_PENSTOCK_KEPT_RECENT", "the file changed too recently for its pages to be kept");
  if (fileOffset > now.size || size > now.size - fileOffset)
    return ErrorRecord::Misuse("ERR_PENSTOCK_KEPT_PAST_END", "the file no longer holds the whole range");
  std::shared_ptr<KeptSpan> span;
  e = KeptSpan::Create(fd, fileOffset, size, now, &span);
  if (!e.ok()) return e;
  if (!StoreKept(id, span)) return ErrorRecord::Misuse("ERR_PENSTOCK_INTERNAL", "kept span id in use");
  *out = std::move(span);
  return {};
}

// A task of a read of kept pages: check (or, as the read's one task, register), then one copy on
// this worker's stream.
ErrorRecord Operation::KeptReadTask(uint64_t begin, uint64_t length, uint64_t* done) {
  if (issued_) {
    ErrorRecord e = issued_->Wait();
    if (!e.ok()) return e;
    *done = length;
    AddProgress(length);
    return {};
  }
  DeviceState* d = PreparedDevice(spec_.device);
  WorkerSlot* slot = d ? d->Slot(ThreadPool::WorkerIndex()) : nullptr;
  if (!slot) return ErrorRecord::Misuse("ERR_PENSTOCK_INTERNAL", "device not prepared");
  Cuda().CtxSetCurrent(d->ctx);  // registration needs a context too
  std::shared_ptr<KeptSpan> span;
  ErrorRecord e = spec_.keepNew ? KeepRange(spec_.keptId, spec_.fd, spec_.fileOffset, spec_.size, spec_.keptSettleNs, &span)
                                : CheckedKept(spec_.keptId, spec_.fd, spec_.fileOffset, spec_.size, &span);
  if (!e.ok()) return e;
  e = PENSTOCK_CUDA(MemcpyHtoDAsync, spec_.dev + begin, span->At(spec_.fileOffset + begin), length, slot->stream);
  ErrorRecord waited = PENSTOCK_CUDA(StreamSynchronize, slot->stream);
  if (e.ok()) e = waited;
  if (!e.ok()) return e;
  *done = length;
  AddProgress(length);
  return {};
}

namespace {

// readKept(id, fd, fileOffset, size, device, devicePtr): a read of kept pages on the calling
// thread, on the device's inline stream; -EBUSY when another thread holds that stream.
Napi::Value ReadKeptJs(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  uint32_t id = static_cast<uint32_t>(ArgInt(Arg(info, 0, "id"), "id", 1, INT32_MAX));
  int fd = ArgInt(Arg(info, 1, "fd"), "fd", 0, INT32_MAX);
  uint64_t fileOffset = ArgU64(Arg(info, 2, "fileOffset"), "fileOffset");
  uint64_t size = ArgU64(Arg(info, 3, "size"), "size");
  int device = ArgInt(Arg(info, 4, "device"), "device", 0, INT32_MAX);
  CUdeviceptr dst = ArgPtr(Arg(info, 5, "devicePtr"), "devicePtr");
  DeviceState* d = PreparedDevice(device);
  if (!d) ThrowRecord(env, ErrorRecord::Misuse("ERR_PENSTOCK_INTERNAL", "device not prepared"));
  InlineStaging& in = d->inlineStaging;
  std::unique_lock<std::mutex> use(in.mutex, std::try_to_lock);
  if (!use.owns_lock()) return Napi::Number::New(env, -EBUSY);
  std::shared_ptr<KeptSpan> span;
  ThrowIfError(env, CheckedKept(id, fd, fileOffset, size, &span));
  ContextGuard guard(d->ctx);
  ErrorRecord e = PENSTOCK_CUDA(MemcpyHtoDAsync, dst, span->At(fileOffset), size, in.stream);
  ErrorRecord waited = PENSTOCK_CUDA(StreamSynchronize, in.stream);
  ThrowIfError(env, e.ok() ? waited : e);
  return Napi::Number::New(env, static_cast<double>(size));
}

// submitKept({ id, keep, issue, fd, fileOffset, size, taskSize, device, devicePtr, settleNs[, progress] }).
// `issue`: check the span and queue its one copy here, on the calling thread; the pool's task
// then only waits for it (issued_copy.h).
Napi::Value SubmitKeptJs(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  SpecReader s(Arg(info, 0, "spec"),
               {"id", "keep", "issue", "fd", "fileOffset", "size", "taskSize", "device", "devicePtr", "settleNs", "progress"});
  OpSpec spec;
  spec.kind = OpKind::KeptRead;
  spec.route = Route::PosixDevice;
  spec.keptId = static_cast<uint32_t>(ArgInt(s.Require("id"), "id", 1, INT32_MAX));
  spec.keepNew = ArgBool(s.Require("keep"), "keep");
  bool issue = ArgBool(s.Require("issue"), "issue");
  spec.fd = ArgInt(s.Require("fd"), "fd", 0, INT32_MAX);
  spec.fileOffset = ArgU64(s.Require("fileOffset"), "fileOffset");
  spec.size = ArgU64(s.Require("size"), "size");
  spec.device = ArgInt(s.Require("device"), "device", 0, INT32_MAX);
  spec.dev = ArgPtr(s.Require("devicePtr"), "devicePtr");
  spec.keptSettleNs = ArgU64(s.Require("settleNs"), "settleNs");
  spec.taskSize = ArgU64(s.Require("taskSize"), "taskSize");
  if (spec.size == 0) ThrowRecord(env, ErrorRecord::Misuse("ERR_PENSTOCK_INVALID_ARGUMENT", "a kept read needs a positive size"));
  CheckTaskSize(env, spec);
  // Its tasks are copies that run at once, each on its worker's stream; a registration is one.
  if (spec.keepNew && spec.taskSize < spec.size)
    ThrowRecord(env, ErrorRecord::Misuse("ERR_PENSTOCK_INVALID_ARGUMENT", "a read that keeps its range is one task"));
  if (issue && (spec.keepNew || spec.taskSize < spec.size))
    ThrowRecord(env, ErrorRecord::Misuse("ERR_PENSTOCK_INVALID_ARGUMENT", "an issued kept read reuses its span, in one task"));
  DeviceState* d = PreparedDevice(spec.device);
  if (!d) ThrowRecord(env, ErrorRecord::Misuse("ERR_PENSTOCK_INTERNAL", "device not prepared"));
  Napi::Value progress = ProgressArg(env, s, &spec);
  std::unique_ptr<IssuedCopy> issued;
  if (issue) {
    std::shared_ptr<KeptSpan> span;
    ThrowIfError(env, CheckedKept(spec.keptId, spec.fd, spec.fileOffset, spec.size, &span));
    ContextGuard guard(d->ctx);
    const char* src = span->At(spec.fileOffset);
    ThrowIfError(env, IssuedCopy::Issue(d, spec.dev, src, spec.size, std::move(span), &issued));
  }
  return StartOperation(env, spec, env.Undefined(), progress, std::move(issued));
}

Napi::Value KeptReleaseJs(const Napi::CallbackInfo& info) {
  uint32_t id = static_cast<uint32_t>(ArgInt(Arg(info, 0, "id"), "id", 1, INT32_MAX));
  return Napi::Boolean::New(info.Env(), ReleaseKept(id));
}

Napi::Value KeptBytesJs(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), static_cast<double>(KeptBytes()));
}

}  // namespace

void RegisterKept(Napi::Env env, Napi::Object exports) {
  exports.Set("readKept", Napi::Function::New(env, ReadKeptJs));
  exports.Set("submitKept", Napi::Function::New(env, SubmitKeptJs));
  exports.Set("keptRelease", Napi::Function::New(env, KeptReleaseJs));
  exports.Set("keptBytes", Napi::Function::New(env, KeptBytesJs));
}

}  // namespace penstock
