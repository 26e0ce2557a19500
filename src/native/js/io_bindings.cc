#include <cstring>
#include <map>
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

Napi::Object StartOperation(Napi::Env env, const OpSpec& spec, Napi::Value keep, Napi::Value progress,
                            std::unique_ptr<IssuedCopy> issued) {
  Instance* instance = Instance::Get(env);
  std::unique_ptr<PinnedUse> pinned = spec.host && spec.size > 0 ? PinnedAcquire(spec.host, spec.size) : nullptr;
  auto op = std::make_shared<Operation>(instance, spec, std::move(pinned));
  if (issued) op->SetIssued(std::move(issued));
  auto js = std::make_unique<JsSettlement>(env, keep, progress);
  Napi::Object handle = Napi::Object::New(env);
  handle.Set("promise", js->Promise());
  uint64_t id = instance->Start(env, op, std::move(js));
  // Read-only: `cancel` goes by it.
  handle.DefineProperty(Napi::PropertyDescriptor::Value("id", Napi::Number::New(env, static_cast<double>(id)), napi_enumerable));
  handle.Set("cancel", instance->CancelFunction(env));
  return handle;
}

Napi::Value ProgressArg(Napi::Env env, const SpecReader& s, OpSpec* spec) {
  Napi::Value progress = s.Has("progress") ? s.Require("progress") : env.Undefined();
  if (!progress.IsUndefined() && !progress.IsFunction())
    ThrowRecord(env, ErrorRecord::Misuse("ERR_PENSTOCK_INVALID_ARGUMENT", "progress must be a function"));
  spec->wantProgress = progress.IsFunction();
  return progress;
}

void CheckTaskSize(Napi::Env env, const OpSpec& spec) {
  if (spec.taskSize == 0) ThrowRecord(env, ErrorRecord::Misuse("ERR_PENSTOCK_INVALID_ARGUMENT", "taskSize must be positive"));
  if ((spec.size + spec.taskSize - 1) / spec.taskSize > TaskClaims::kMaxTasks)
    ThrowRecord(env, ErrorRecord::Misuse("ERR_PENSTOCK_INVALID_ARGUMENT", "taskSize cuts the operation into too many tasks"));
}

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

Napi::Value Submit(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Value arg = Arg(info, 0, "spec");
  if (!arg.IsObject()) ThrowRecord(env, ErrorRecord::Misuse("ERR_PENSTOCK_INVALID_ARGUMENT", "the operation spec must be an object"));
  std::string route = ArgString(arg.As<Napi::Object>().Get("route"), "route");
  OpSpec spec;
  // Every key the route uses must be there, and nothing else may be: no value is assumed here.
  if (route == "posix-host") {
    spec.route = Route::PosixHost;
  } else if (route == "posix-device") {
    spec.route = Route::PosixDevice;
  } else if (route == "cufile") {
    spec.route = Route::CuFile;
  } else {
    ThrowRecord(env, ErrorRecord::Misuse("ERR_PENSTOCK_INVALID_ARGUMENT", "unknown route " + route));
  }
  std::initializer_list<const char*> host = {"write", "route", "fd", "directFd", "fileOffset", "size", "taskSize", "maxRunners",
                                             "writePiece", "progress", "host", "hostOffset", "hostStagePiece", "directPiece"};
  std::initializer_list<const char*> staged = {"write", "route", "fd", "directFd", "fileOffset", "size", "taskSize", "maxRunners",
                                               "writePiece", "progress", "devicePtr", "device", "stagePiece", "mapped", "mappedPiece",
                                               "mappedClaimDivisor", "stageScratch", "gatherCopy", "gatherStreams"};
  std::initializer_list<const char*> cufile = {"write", "route", "fd", "directFd", "fileOffset", "size", "taskSize", "maxRunners",
                                               "writePiece", "progress", "devicePtr", "device", "cufileHandle", "cufileBase",
                                               "cufileBaseOffset"};
  SpecReader s(arg, spec.route == Route::PosixHost ? host : spec.route == Route::PosixDevice ? staged : cufile);
  spec.write = ArgBool(s.Require("write"), "write");
  spec.fd = ArgInt(s.Require("fd"), "fd", 0, INT32_MAX);
  spec.directFd = ArgInt(s.Require("directFd"), "directFd", -1, INT32_MAX);
  spec.fileOffset = ArgU64(s.Require("fileOffset"), "fileOffset");
  spec.size = ArgU64(s.Require("size"), "size");
  spec.taskSize = ArgU64(s.Require("taskSize"), "taskSize");
  CheckTaskSize(env, spec);
  spec.maxRunners = ArgInt(s.Require("maxRunners"), "maxRunners", 0, kMaxWorkers);
  spec.writePiece = ArgU64(s.Require("writePiece"), "writePiece");
  Napi::Value keep = env.Undefined();
  if (spec.route == Route::PosixHost) {
    keep = s.Require("host");
    HostSpan span = ArgHost(keep, "host");
    uint64_t offset = ArgU64(s.Require("hostOffset"), "hostOffset");
    CheckSpan(env, span, offset, spec.size, "host memory");
    spec.host = span.data + offset;
    spec.hostStagePiece = ArgU64(s.Require("hostStagePiece"), "hostStagePiece");
    spec.directPiece = ArgU64(s.Require("directPiece"), "directPiece");
    if (spec.directFd >= 0 && spec.directPiece == 0)
      ThrowRecord(env, ErrorRecord::Misuse("ERR_PENSTOCK_INVALID_ARGUMENT", "O_DIRECT needs a positive directPiece"));
  } else {
    spec.dev = ArgPtr(s.Require("devicePtr"), "devicePtr");
    spec.device = ArgInt(s.Require("device"), "device", 0, kMaxPipes - 1);
  }
  if (spec.route == Route::PosixDevice) {
    spec.stagePiece = ArgU64(s.Require("stagePiece"), "stagePiece");
    if (spec.stagePiece == 0 || spec.stagePiece % kAlign)
      ThrowRecord(env, ErrorRecord::Misuse("ERR_PENSTOCK_INVALID_ARGUMENT", "stagePiece must be a positive multiple of 4096"));
    spec.mapped = ArgBool(s.Require("mapped"), "mapped");
    spec.mappedPiece = ArgU64(s.Require("mappedPiece"), "mappedPiece");
    spec.mappedClaimDivisor = ArgU64(s.Require("mappedClaimDivisor"), "mappedClaimDivisor");
    spec.stageScratch = ArgU64(s.Require("stageScratch"), "stageScratch");
    spec.gatherCopy = s.Has("gatherCopy") ? ArgU64(s.Require("gatherCopy"), "gatherCopy") : 0;
    if (spec.gatherCopy) {
      if (spec.write || spec.mapped || spec.stageScratch == 0 || spec.directFd >= 0)
        ThrowRecord(env, ErrorRecord::Misuse("ERR_PENSTOCK_INVALID_ARGUMENT",
                                             "gatherCopy needs a buffered read through scratch (stageScratch), without a mapped share"));
      spec.gatherStreams = ArgInt(s.Require("gatherStreams"), "gatherStreams", 1, kGatherStreams);
    }
    // Registration works on whole pages and neighbouring pieces must not share one: a mapped share
    // needs a read with page-aligned tasks, and a driver that can register.
    if (spec.mapped && (spec.write || spec.mappedPiece == 0 || spec.mappedClaimDivisor == 0 || spec.fileOffset % kAlign ||
                        spec.taskSize % kAlign))
      ThrowRecord(env, ErrorRecord::Misuse("ERR_PENSTOCK_INVALID_ARGUMENT",
                                           "a mapped share needs a read with page-aligned fileOffset and taskSize, a positive "
                                           "mappedPiece and a positive mappedClaimDivisor"));
    if (spec.mapped && !(Cuda().MemHostRegister && Cuda().MemHostUnregister))
      ThrowRecord(env, ErrorRecord::Misuse("ERR_PENSTOCK_MAPPED_UNAVAILABLE", "this CUDA driver has no cuMemHostRegister"));
    std::lock_guard<std::mutex> lock(PoolMutex());
    DeviceState* d = PreparedDevice(spec.device);
    if (!d) ThrowRecord(env, ErrorRecord::Misuse("ERR_PENSTOCK_INTERNAL", "device not prepared"));
    // Another environment may have grown the pool since this device was prepared here.
    if (d->slotCount.load() < ThreadPool::Instance().Size()) {
      ErrorRecord e = PrepareDevice(spec.device, d->half, ThreadPool::Instance().Size(), d->numaNode, 0, 0);
      if (!e.ok()) ThrowRecord(env, e);
    }
  }
  if (spec.route == Route::CuFile) {
    int id = ArgInt(s.Require("cufileHandle"), "cufileHandle", 0, INT32_MAX);
    spec.cufileBase = ArgPtr(s.Require("cufileBase"), "cufileBase");
    spec.cufileBaseOffset = ArgU64(s.Require("cufileBaseOffset"), "cufileBaseOffset");
    if (!FindCuFileHandle(id, &spec.cufile))
      ThrowRecord(env, ErrorRecord::Misuse("ERR_PENSTOCK_INTERNAL", "unknown cuFile handle"));
  }
  Napi::Value progress = ProgressArg(env, s, &spec);
  return StartOperation(env, spec, keep, progress);
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
  exports.Set("submit", Napi::Function::New(env, Submit));
  exports.Set("inflight", Napi::Function::New(env, Inflight));
  exports.Set("residency", Napi::Function::New(env, ResidencyJs));
  exports.Set("dropCache", Napi::Function::New(env, DropCacheJs));
  exports.Set("peerCredentials", Napi::Function::New(env, PeerCredentialsJs));
}

}  // namespace penstock
