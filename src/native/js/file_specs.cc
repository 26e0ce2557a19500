// submit(spec): a transfer between a file and memory. One reader per route, each with exactly
// its route's keys, every one required unless said otherwise (no value is assumed here), each
// building that route's own task description (engine/file_tasks.h).
#include <mutex>

#include "engine/device.h"
#include "engine/file_tasks.h"
#include "engine/staging_pipe.h"
#include "js/args.h"
#include "js/bindings.h"
#include "js/errors.h"
#include "js/jobs.h"
#include "sys/posix_io.h"
#include "sys/thread_pool.h"

namespace penstock {

namespace {

// The keys every route has.
#define PENSTOCK_FILE_KEYS "write", "route", "fd", "directFd", "fileOffset", "size", "taskSize", "maxRunners", "writePiece", "progress"

FileRange ReadFileRange(Napi::Env env, const SpecReader& s) {
  FileRange f;
  f.write = ArgBool(s.Require("write"), "write");
  f.fd = ArgInt(s.Require("fd"), "fd", 0, INT32_MAX);
  f.directFd = ArgInt(s.Require("directFd"), "directFd", -1, INT32_MAX);
  f.fileOffset = ArgU64(s.Require("fileOffset"), "fileOffset");
  f.size = ArgU64(s.Require("size"), "size");
  f.taskSize = ArgU64(s.Require("taskSize"), "taskSize");
  CheckTaskSize(env, f.size, f.taskSize);
  f.maxRunners = ArgInt(s.Require("maxRunners"), "maxRunners", 0, kMaxWorkers);
  f.writePiece = ArgU64(s.Require("writePiece"), "writePiece");
  return f;
}

Napi::Value SubmitHost(Napi::Env env, const Napi::Value& arg) {
  SpecReader s(arg, {PENSTOCK_FILE_KEYS, "host", "hostOffset", "hostStagePiece", "directPiece"});
  HostSpec spec;
  spec.file = ReadFileRange(env, s);
  Napi::Value keep = s.Require("host");
  HostSpan span = ArgHost(keep, "host");
  uint64_t offset = ArgU64(s.Require("hostOffset"), "hostOffset");
  CheckSpan(env, span, offset, spec.file.size, "host memory");
  spec.host = span.data + offset;
  spec.hostStagePiece = ArgU64(s.Require("hostStagePiece"), "hostStagePiece");
  spec.directPiece = ArgU64(s.Require("directPiece"), "directPiece");
  if (spec.file.directFd >= 0 && spec.directPiece == 0)
    ThrowRecord(env, ErrorRecord::Misuse("ERR_PENSTOCK_INVALID_ARGUMENT", "O_DIRECT needs a positive directPiece"));
  Napi::Value progress = ProgressArg(env, s);
  std::unique_ptr<PinnedUse> pinned = spec.file.size > 0 ? PinnedAcquire(spec.host, spec.file.size) : nullptr;
  return StartJob(env, std::make_unique<HostTransfer>(spec), keep, progress, std::move(pinned));
}

Napi::Value SubmitStaged(Napi::Env env, const Napi::Value& arg) {
  SpecReader s(arg, {PENSTOCK_FILE_KEYS, "devicePtr", "device", "stagePiece", "mapped", "mappedPiece", "mappedClaimDivisor",
                     "stageScratch", "gatherCopy"});
  StagedSpec spec;
  spec.file = ReadFileRange(env, s);
  const FileRange& f = spec.file;
  spec.dev = ArgPtr(s.Require("devicePtr"), "devicePtr");
  spec.device = ArgInt(s.Require("device"), "device", 0, kMaxPipes - 1);
  spec.stagePiece = ArgU64(s.Require("stagePiece"), "stagePiece");
  if (spec.stagePiece == 0 || spec.stagePiece % kAlign)
    ThrowRecord(env, ErrorRecord::Misuse("ERR_PENSTOCK_INVALID_ARGUMENT", "stagePiece must be a positive multiple of 4096"));
  spec.mapped = ArgBool(s.Require("mapped"), "mapped");
  spec.mappedPiece = ArgU64(s.Require("mappedPiece"), "mappedPiece");
  spec.mappedClaimDivisor = ArgU64(s.Require("mappedClaimDivisor"), "mappedClaimDivisor");
  spec.stageScratch = ArgU64(s.Require("stageScratch"), "stageScratch");
  // Optional: absent means 0 (through the bounce halves).
  spec.gatherCopy = s.Has("gatherCopy") ? ArgU64(s.Require("gatherCopy"), "gatherCopy") : 0;
  if (spec.gatherCopy && (f.write || spec.mapped || spec.stageScratch == 0 || f.directFd >= 0))
    ThrowRecord(env, ErrorRecord::Misuse("ERR_PENSTOCK_INVALID_ARGUMENT",
                                         "gatherCopy needs a buffered read through scratch (stageScratch), without a mapped share"));
  // Registration works on whole pages and neighbouring pieces must not share one: a mapped share
  // needs a read with page-aligned tasks, and a driver that can register.
  if (spec.mapped && (f.write || spec.mappedPiece == 0 || spec.mappedClaimDivisor == 0 || f.fileOffset % kAlign || f.taskSize % kAlign))
    ThrowRecord(env, ErrorRecord::Misuse("ERR_PENSTOCK_INVALID_ARGUMENT",
                                         "a mapped share needs a read with page-aligned fileOffset and taskSize, a positive "
                                         "mappedPiece and a positive mappedClaimDivisor"));
  if (spec.mapped && !(Cuda().MemHostRegister && Cuda().MemHostUnregister))
    ThrowRecord(env, ErrorRecord::Misuse("ERR_PENSTOCK_MAPPED_UNAVAILABLE", "this CUDA driver has no cuMemHostRegister"));
  {
    std::lock_guard<std::mutex> lock(PoolMutex());
    DeviceState* d = PreparedDevice(spec.device);
    if (!d) ThrowRecord(env, ErrorRecord::Misuse("ERR_PENSTOCK_INTERNAL", "device not prepared"));
    // Another environment may have grown the pool since this device was prepared here.
    if (d->slotCount.load() < ThreadPool::Instance().Size()) {
      ErrorRecord e = PrepareDevice(spec.device, d->half, ThreadPool::Instance().Size(), d->numaNode, 0, 0);
      if (!e.ok()) ThrowRecord(env, e);
    }
  }
  Napi::Value progress = ProgressArg(env, s);
  return StartJob(env, std::make_unique<StagedTransfer>(spec), env.Undefined(), progress);
}

Napi::Value SubmitCuFile(Napi::Env env, const Napi::Value& arg) {
  SpecReader s(arg, {PENSTOCK_FILE_KEYS, "devicePtr", "device", "cufileHandle", "cufileBase", "cufileBaseOffset"});
  CuFileSpec spec;
  spec.file = ReadFileRange(env, s);
  spec.dev = ArgPtr(s.Require("devicePtr"), "devicePtr");
  spec.device = ArgInt(s.Require("device"), "device", 0, kMaxPipes - 1);
  int id = ArgInt(s.Require("cufileHandle"), "cufileHandle", 0, INT32_MAX);
  spec.base = ArgPtr(s.Require("cufileBase"), "cufileBase");
  spec.baseOffset = ArgU64(s.Require("cufileBaseOffset"), "cufileBaseOffset");
  if (!FindCuFileHandle(id, &spec.handle)) ThrowRecord(env, ErrorRecord::Misuse("ERR_PENSTOCK_INTERNAL", "unknown cuFile handle"));
  Napi::Value progress = ProgressArg(env, s);
  return StartJob(env, std::make_unique<CuFileTransfer>(spec), env.Undefined(), progress);
}

#undef PENSTOCK_FILE_KEYS

}  // namespace

Napi::Value SubmitTransfer(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Value arg = Arg(info, 0, "spec");
  if (!arg.IsObject()) ThrowRecord(env, ErrorRecord::Misuse("ERR_PENSTOCK_INVALID_ARGUMENT", "the operation spec must be an object"));
  std::string route = ArgString(arg.As<Napi::Object>().Get("route"), "route");
  if (route == "posix-host") return SubmitHost(env, arg);
  if (route == "posix-device") return SubmitStaged(env, arg);
  if (route == "cufile") return SubmitCuFile(env, arg);
  ThrowRecord(env, ErrorRecord::Misuse("ERR_PENSTOCK_INVALID_ARGUMENT", "unknown route " + route));
}

}  // namespace penstock
