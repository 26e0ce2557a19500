#include "js/args.h"
#include "js/background_work.h"
#include "js/bindings.h"
#include "engine/device.h"
#include "engine/copy_task.h"
#include "js/host_memory.h"
#include "js/jobs.h"
#include "sys/thread_pool.h"

namespace penstock {

namespace {

int OrdinalArg(const Napi::CallbackInfo& info) { return ArgInt(Arg(info, 0, "ordinal"), "ordinal", 0, 1 << 20); }

Napi::Value DeviceInfo(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int ordinal = OrdinalArg(info);
  ErrorRecord e = CheckOrdinal(ordinal);
  if (!e.ok()) ThrowRecord(env, e);
  const CudaApi& cu = Cuda();
  CUdevice dev;
  ThrowIfError(env, PENSTOCK_CUDA(DeviceGet, &dev, ordinal));
  char name[256] = {0};
  cu.DeviceGetName(name, sizeof name, dev);
  size_t total = 0;
  cu.DeviceTotalMem(&total, dev);
  char bus[64] = {0};
  cu.DeviceGetPCIBusId(bus, sizeof bus, dev);
  int major = 0, minor = 0;
  cu.DeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
  cu.DeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
  Napi::Object o = Napi::Object::New(env);
  o.Set("ordinal", ordinal);
  o.Set("name", name);
  o.Set("totalMemory", static_cast<double>(total));
  o.Set("pciBusId", bus);
  Napi::Array cc = Napi::Array::New(env, 2);
  cc.Set(0u, major);
  cc.Set(1u, minor);
  o.Set("computeCapability", cc);
  return o;
}

Napi::Value DevicePrepare(const Napi::CallbackInfo& info) {
  int ordinal = OrdinalArg(info);
  uint64_t bounce = ArgU64(Arg(info, 1, "bounceBytes"), "bounceBytes");
  int numaNode = ArgInt(Arg(info, 2, "numaNode"), "numaNode", -1, 1 << 20);
  uint64_t inlineBytes = ArgU64(Arg(info, 3, "inlineBytes"), "inlineBytes");
  uint64_t gatherBytes = ArgU64(Arg(info, 4, "gatherBytes"), "gatherBytes");
  if (bounce < 2) ThrowRecord(info.Env(), ErrorRecord::Misuse("ERR_PENSTOCK_INVALID_ARGUMENT", "bounceBytes must be at least 2"));
  std::lock_guard<std::mutex> lock(PoolMutex());
  ErrorRecord e =
      PrepareDevice(ordinal, bounce / 2, ThreadPool::Instance().Size(), numaNode, inlineBytes, gatherBytes);
  if (!e.ok()) ThrowRecord(info.Env(), e);
  return info.Env().Undefined();
}

// deviceFill(ordinal, slots): a Promise; allocates on a background thread what devicePrepare
// left for later (the first `slots` workers' bounce buffers, the gather stage), while reads start
// meanwhile.
Napi::Value DeviceFillJs(const Napi::CallbackInfo& info) {
  int ordinal = OrdinalArg(info);
  int slots = ArgInt(Arg(info, 1, "slots"), "slots", 0, kMaxWorkers);
  return StartBackgroundWork(info.Env(), "penstock-device-fill", [ordinal, slots] { return FillDevice(ordinal, slots); });
}

Napi::Value DeviceAllocJs(const Napi::CallbackInfo& info) {
  CUdeviceptr p = 0;
  ErrorRecord e = DeviceAlloc(OrdinalArg(info), ArgU64(Arg(info, 1, "size"), "size"), &p);
  if (!e.ok()) ThrowRecord(info.Env(), e);
  return FromPtr(info.Env(), p);
}

Napi::Value DeviceFreeJs(const Napi::CallbackInfo& info) {
  ErrorRecord e = DeviceFree(OrdinalArg(info), ArgPtr(Arg(info, 1, "ptr"), "ptr"));
  if (!e.ok()) ThrowRecord(info.Env(), e);
  return info.Env().Undefined();
}

Napi::Value PointerInfoJs(const Napi::CallbackInfo& info) {
  PointerInfo pi;
  ErrorRecord e = QueryPointer(ArgPtr(Arg(info, 0, "ptr"), "ptr"), &pi);
  if (!e.ok()) ThrowRecord(info.Env(), e);
  Napi::Object o = Napi::Object::New(info.Env());
  o.Set("device", pi.device);
  o.Set("base", FromPtr(info.Env(), pi.base));
  o.Set("size", static_cast<double>(pi.size));
  return o;
}

Napi::Value MemGetInfoJs(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  CUcontext ctx;
  ErrorRecord e = RetainContext(OrdinalArg(info), &ctx);
  if (!e.ok()) ThrowRecord(env, e);
  ContextGuard guard(ctx);
  size_t free = 0, total = 0;
  ThrowIfError(env, PENSTOCK_CUDA(MemGetInfo, &free, &total));
  Napi::Object o = Napi::Object::New(env);
  o.Set("free", static_cast<double>(free));
  o.Set("total", static_cast<double>(total));
  return o;
}

// copyHostToDevice(ordinal, dst, src, srcOffset, size) / copyDeviceToHost(ordinal, dst, dstOffset, src, size)
Napi::Value CopyJs(const Napi::CallbackInfo& info, bool toDevice) {
  Napi::Env env = info.Env();
  CopySpec spec;
  spec.toDevice = toDevice;
  spec.device = OrdinalArg(info);
  Napi::Value hostValue = Arg(info, toDevice ? 2 : 1, "host");
  HostSpan span = ArgHost(hostValue, "host");
  uint64_t hostOffset = ArgU64(Arg(info, toDevice ? 3 : 2, "hostOffset"), "hostOffset");
  spec.dev = ArgPtr(Arg(info, toDevice ? 1 : 3, "devicePtr"), "devicePtr");
  spec.size = ArgU64(Arg(info, 4, "size"), "size");
  CheckSpan(env, span, hostOffset, spec.size, "host memory");
  spec.host = span.data + hostOffset;
  std::unique_ptr<PinnedUse> pinned = spec.size > 0 ? PinnedAcquire(spec.host, spec.size) : nullptr;
  return StartJob(env, std::make_unique<BufferCopy>(spec), hostValue, env.Undefined(), std::move(pinned));
}

Napi::Value CopyHtoD(const Napi::CallbackInfo& info) { return CopyJs(info, true); }
Napi::Value CopyDtoH(const Napi::CallbackInfo& info) { return CopyJs(info, false); }

Napi::Value PinnedAllocJs(const Napi::CallbackInfo& info) {
  uint64_t size = ArgU64(Arg(info, 0, "size"), "size");
  if (size == 0) ThrowRecord(info.Env(), ErrorRecord::Misuse("ERR_PENSTOCK_INVALID_SIZE", "A pinned buffer must hold at least one byte"));
  return PinnedAlloc(info.Env(), size);
}

Napi::Value PinnedFreeJs(const Napi::CallbackInfo& info) {
  Napi::Value v = Arg(info, 0, "buffer");
  if (!v.IsArrayBuffer())
    ThrowRecord(info.Env(), ErrorRecord::Misuse("ERR_PENSTOCK_FOREIGN_BUFFER", "Not a penstock pinned buffer"));
  PinnedFree(info.Env(), v.As<Napi::ArrayBuffer>());
  return info.Env().Undefined();
}

Napi::Value PinnedBytesJs(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), static_cast<double>(PinnedBytes()));
}

}  // namespace

void RegisterMemory(Napi::Env env, Napi::Object exports) {
  exports.Set("deviceInfo", Napi::Function::New(env, DeviceInfo));
  exports.Set("devicePrepare", Napi::Function::New(env, DevicePrepare));
  exports.Set("deviceFill", Napi::Function::New(env, DeviceFillJs));
  exports.Set("deviceAlloc", Napi::Function::New(env, DeviceAllocJs));
  exports.Set("deviceFree", Napi::Function::New(env, DeviceFreeJs));
  exports.Set("pointerInfo", Napi::Function::New(env, PointerInfoJs));
  exports.Set("memGetInfo", Napi::Function::New(env, MemGetInfoJs));
  exports.Set("copyHostToDevice", Napi::Function::New(env, CopyHtoD));
  exports.Set("copyDeviceToHost", Napi::Function::New(env, CopyDtoH));
  exports.Set("pinnedAlloc", Napi::Function::New(env, PinnedAllocJs));
  exports.Set("pinnedFree", Napi::Function::New(env, PinnedFreeJs));
  exports.Set("pinnedBytes", Napi::Function::New(env, PinnedBytesJs));
}

}  // namespace penstock
