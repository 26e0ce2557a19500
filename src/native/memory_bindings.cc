#include "bindings.h"
#include "device.h"
#include "host_memory.h"
#include "thread_pool.h"

namespace penstock {

namespace {

Napi::Value DeviceInfo(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int ordinal = info[0].As<Napi::Number>().Int32Value();
  ErrorRecord e = CheckOrdinal(ordinal);
  if (!e.ok()) ThrowRecord(env, e);
  const CudaApi& cu = Cuda();
  CUdevice dev;
  CUresult r = cu.DeviceGet(&dev, ordinal);
  if (r != CUDA_SUCCESS) ThrowRecord(env, ErrorRecord::FromCuda(r, "cuDeviceGet"));
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
  int ordinal = info[0].As<Napi::Number>().Int32Value();
  size_t bounce = ToU64(info[1]);
  int numaNode = info[2].IsNumber() ? info[2].As<Napi::Number>().Int32Value() : -1;
  ErrorRecord e = PrepareDevice(ordinal, bounce / 2, ThreadPool::Instance().Size(), numaNode);
  if (!e.ok()) ThrowRecord(info.Env(), e);
  return info.Env().Undefined();
}

Napi::Value DeviceAllocJs(const Napi::CallbackInfo& info) {
  CUdeviceptr p = 0;
  ErrorRecord e = DeviceAlloc(info[0].As<Napi::Number>().Int32Value(), ToU64(info[1]), &p);
  if (!e.ok()) ThrowRecord(info.Env(), e);
  return FromPtr(info.Env(), p);
}

Napi::Value DeviceFreeJs(const Napi::CallbackInfo& info) {
  ErrorRecord e = DeviceFree(info[0].As<Napi::Number>().Int32Value(), ToPtr(info[1]));
  if (!e.ok()) ThrowRecord(info.Env(), e);
  return info.Env().Undefined();
}

Napi::Value PointerInfoJs(const Napi::CallbackInfo& info) {
  PointerInfo pi;
  ErrorRecord e = QueryPointer(ToPtr(info[0]), &pi);
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
  ErrorRecord e = RetainContext(info[0].As<Napi::Number>().Int32Value(), &ctx);
  if (!e.ok()) ThrowRecord(env, e);
  ContextGuard guard(ctx);
  size_t free = 0, total = 0;
  CUresult r = Cuda().MemGetInfo(&free, &total);
  if (r != CUDA_SUCCESS) ThrowRecord(env, ErrorRecord::FromCuda(r, "cuMemGetInfo"));
  Napi::Object o = Napi::Object::New(env);
  o.Set("free", static_cast<double>(free));
  o.Set("total", static_cast<double>(total));
  return o;
}

// copyHostToDevice(ordinal, dst, src, srcOffset, size) / copyDeviceToHost(ordinal, dst, dstOffset, src, size)
Napi::Value CopyJs(const Napi::CallbackInfo& info, bool toDevice) {
  Napi::Env env = info.Env();
  OpSpec spec;
  spec.route = toDevice ? Route::CopyToDevice : Route::CopyToHost;
  spec.device = info[0].As<Napi::Number>().Int32Value();
  size_t length = 0;
  Napi::Value hostValue = toDevice ? info[2] : info[1];
  char* host = HostData(hostValue, &length);
  uint64_t hostOffset = ToU64(toDevice ? info[3] : info[2]);
  spec.host = host + hostOffset;
  spec.dev = ToPtr(toDevice ? info[1] : info[3]);
  spec.size = ToU64(info[4]);
  return StartOperation(env, spec, hostValue, env.Undefined());
}

Napi::Value CopyHtoD(const Napi::CallbackInfo& info) { return CopyJs(info, true); }
Napi::Value CopyDtoH(const Napi::CallbackInfo& info) { return CopyJs(info, false); }

Napi::Value PinnedAllocJs(const Napi::CallbackInfo& info) { return PinnedAlloc(info.Env(), ToU64(info[0])); }

Napi::Value PinnedFreeJs(const Napi::CallbackInfo& info) {
  PinnedFree(info.Env(), info[0].As<Napi::ArrayBuffer>());
  return info.Env().Undefined();
}

Napi::Value PinnedBytesJs(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), static_cast<double>(PinnedBytes()));
}

}  // namespace

void RegisterMemory(Napi::Env env, Napi::Object exports) {
  exports.Set("deviceInfo", Napi::Function::New(env, DeviceInfo));
  exports.Set("devicePrepare", Napi::Function::New(env, DevicePrepare));
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
