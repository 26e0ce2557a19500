// The JS face of kept pages (engine/kept_pages.h): reads on the calling thread, operations that
// read kept ranges on the pool, and the registry's release and size.
#include <cerrno>

#include "engine/device.h"
#include "engine/kept_pages.h"
#include "engine/kept_read.h"
#include "js/args.h"
#include "js/bindings.h"
#include "js/errors.h"
#include "js/jobs.h"

namespace penstock {

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
  bool busy = false;
  ThrowIfError(env, ReadKeptNow(id, fd, fileOffset, size, device, dst, &busy));
  return Napi::Number::New(env, busy ? -EBUSY : static_cast<double>(size));
}

// submitKept({ id, keep, issue, fd, fileOffset, size, taskSize, device, devicePtr, settleNs[, progress] }).
// `issue`: check the span and queue its one copy here, on the calling thread; the pool's task
// then only waits for it (issued_copy.h).
Napi::Value SubmitKeptJs(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  SpecReader s(Arg(info, 0, "spec"),
               {"id", "keep", "issue", "fd", "fileOffset", "size", "taskSize", "device", "devicePtr", "settleNs", "progress"});
  KeptSpec spec;
  spec.id = static_cast<uint32_t>(ArgInt(s.Require("id"), "id", 1, INT32_MAX));
  spec.keepNew = ArgBool(s.Require("keep"), "keep");
  bool issue = ArgBool(s.Require("issue"), "issue");
  spec.fd = ArgInt(s.Require("fd"), "fd", 0, INT32_MAX);
  spec.fileOffset = ArgU64(s.Require("fileOffset"), "fileOffset");
  spec.size = ArgU64(s.Require("size"), "size");
  spec.device = ArgInt(s.Require("device"), "device", 0, INT32_MAX);
  spec.dev = ArgPtr(s.Require("devicePtr"), "devicePtr");
  spec.settleNs = ArgU64(s.Require("settleNs"), "settleNs");
  spec.taskSize = ArgU64(s.Require("taskSize"), "taskSize");
  if (spec.size == 0) ThrowRecord(env, ErrorRecord::Misuse("ERR_PENSTOCK_INVALID_ARGUMENT", "a kept read needs a positive size"));
  CheckTaskSize(env, spec.size, spec.taskSize);
  // Its tasks are copies that run at once, each on its worker's stream; a registration is one.
  if (spec.keepNew && spec.taskSize < spec.size)
    ThrowRecord(env, ErrorRecord::Misuse("ERR_PENSTOCK_INVALID_ARGUMENT", "a read that keeps its range is one task"));
  if (issue && (spec.keepNew || spec.taskSize < spec.size))
    ThrowRecord(env, ErrorRecord::Misuse("ERR_PENSTOCK_INVALID_ARGUMENT", "an issued kept read reuses its span, in one task"));
  if (!PreparedDevice(spec.device)) ThrowRecord(env, ErrorRecord::Misuse("ERR_PENSTOCK_INTERNAL", "device not prepared"));
  Napi::Value progress = ProgressArg(env, s);
  std::unique_ptr<IssuedCopy> issued;
  if (issue) ThrowIfError(env, IssueKeptCopy(spec.id, spec.fd, spec.fileOffset, spec.size, spec.device, spec.dev, &issued));
  return StartJob(env, std::make_unique<KeptRead>(spec, std::move(issued)), env.Undefined(), progress);
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
