// CUDA IPC: 64-byte handles of device allocations, opened and closed in other processes.
// Native code only runs the driver calls and reports what the driver said; whether memory may be
// exported, which GPU a handle belongs to and what a handle looks like in JSON are decided in
// TypeScript (src/ipc.ts).
#include <cstdio>
#include <cstring>
#include <mutex>
#include <random>

#include "js/args.h"
#include "js/bindings.h"
#include "engine/device.h"
#include "js/errors.h"

namespace penstock {

namespace {

// The IPC entry points are optional symbols: a driver without them gets a typed error, never a
// call through a null pointer.
ErrorRecord RequireIpc() {
  ErrorRecord e = RequireCuda();
  if (!e.ok()) return e;
  const std::string& missing = CudaStatus().ipcMissing;
  if (!missing.empty())
    return ErrorRecord::Misuse("ERR_PENSTOCK_IPC_UNSUPPORTED",
                               "The CUDA driver lacks the IPC functions: " + missing);
  return {};
}

// Runs `fn` with the primary context of `ordinal` current (IPC calls act on the current context).
template <typename Fn>
ErrorRecord InContext(int ordinal, Fn fn) {
  ErrorRecord e = RequireIpc();
  if (!e.ok()) return e;
  CUcontext ctx;
  e = RetainContext(ordinal, &ctx);
  if (!e.ok()) return e;
  ContextGuard guard(ctx);
  return fn();
}

Napi::Value IpcStatusJs(const Napi::CallbackInfo& info) {
  Napi::Object o = Napi::Object::New(info.Env());
  const CudaState& s = CudaStatus();
  o.Set("available", s.loaded && s.ipcMissing.empty());
  if (!s.ipcMissing.empty()) o.Set("missing", s.ipcMissing);
  return o;
}

// What the driver says about the allocation behind `ptr`; a field is absent when the driver
// did not answer (older drivers do not know every attribute).
Napi::Value IpcPointerFactsJs(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int ordinal = ArgInt(Arg(info, 0, "ordinal"), "ordinal", 0, 1 << 20);
  CUdeviceptr ptr = ArgPtr(Arg(info, 1, "ptr"), "ptr");
  Napi::Object o = Napi::Object::New(env);
  ThrowIfError(env, InContext(ordinal, [&] {
    const CudaApi& cu = Cuda();
    CUdeviceptr start = 0;
    if (cu.PointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, ptr) == CUDA_SUCCESS)
      o.Set("rangeStart", FromPtr(env, start));
    size_t size = 0;
    if (cu.PointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, ptr) == CUDA_SUCCESS)
      o.Set("rangeSize", static_cast<double>(size));
    int capable = 0;
    if (cu.PointerGetAttribute(&capable, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, ptr) == CUDA_SUCCESS)
      o.Set("legacyIpcCapable", capable != 0);
    void* pool = nullptr;
    if (cu.PointerGetAttribute(&pool, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, ptr) == CUDA_SUCCESS)
      o.Set("fromPool", pool != nullptr);
    return ErrorRecord{};
  }));
  return o;
}

Napi::Value IpcGetMemHandleJs(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int ordinal = ArgInt(Arg(info, 0, "ordinal"), "ordinal", 0, 1 << 20);
  CUdeviceptr ptr = ArgPtr(Arg(info, 1, "ptr"), "ptr");
  CUipcMemHandle h;
  std::memset(&h, 0, sizeof h);
  ThrowIfError(env, InContext(ordinal, [&] {
    return PENSTOCK_CUDA(IpcGetMemHandle, &h, ptr);
  }));
  return Napi::Buffer<char>::Copy(env, h.reserved, sizeof h.reserved);
}

// ipcOpenMemHandle(ordinal, handle: Uint8Array of 64 bytes, flags) → base pointer of the mapping.
Napi::Value IpcOpenMemHandleJs(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int ordinal = ArgInt(Arg(info, 0, "ordinal"), "ordinal", 0, 1 << 20);
  HostSpan bytes = ArgHost(Arg(info, 1, "handle"), "handle");
  if (bytes.length != CU_IPC_HANDLE_SIZE)
    ThrowRecord(env, ErrorRecord::Misuse("ERR_PENSTOCK_INTERNAL", "an IPC handle must be 64 bytes"));
  CUipcMemHandle h;
  std::memcpy(h.reserved, bytes.data, sizeof h.reserved);
  unsigned flags = static_cast<unsigned>(ArgU64(Arg(info, 2, "flags"), "flags"));
  CUdeviceptr ptr = 0;
  ThrowIfError(env, InContext(ordinal, [&] {
    return PENSTOCK_CUDA(IpcOpenMemHandle, &ptr, h, flags);
  }));
  return FromPtr(env, ptr);
}

Napi::Value IpcCloseMemHandleJs(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int ordinal = ArgInt(Arg(info, 0, "ordinal"), "ordinal", 0, 1 << 20);
  CUdeviceptr ptr = ArgPtr(Arg(info, 1, "ptr"), "ptr");
  ThrowIfError(env, InContext(ordinal, [&] {
    return PENSTOCK_CUDA(IpcCloseMemHandle, ptr);
  }));
  return env.Undefined();
}

Napi::Value DeviceByPciBusIdJs(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::string bus = ArgString(Arg(info, 0, "busId"), "busId");
  ThrowIfError(env, RequireIpc());
  CUdevice dev = -1;
  ThrowIfError(env, PENSTOCK_CUDA(DeviceGetByPCIBusId, &dev, bus.c_str()));
  return Napi::Number::New(env, dev);
}

// A random id of this process, the same in every environment (worker threads included), so an
// exporter recognises its own handles; pids alone repeat across PID namespaces.
Napi::Value IpcProcessIdJs(const Napi::CallbackInfo& info) {
  static std::once_flag once;
  static char id[33];
  std::call_once(once, [] {
    std::random_device rd;
    for (int i = 0; i < 4; i++) std::snprintf(id + 8 * i, 9, "%08x", static_cast<unsigned>(rd()));
  });
  return Napi::String::New(info.Env(), id, 32);
}

}  // namespace

void RegisterIpc(Napi::Env env, Napi::Object exports) {
  exports.Set("ipcStatus", Napi::Function::New(env, IpcStatusJs));
  exports.Set("ipcProcessId", Napi::Function::New(env, IpcProcessIdJs));
  exports.Set("ipcPointerFacts", Napi::Function::New(env, IpcPointerFactsJs));
  exports.Set("ipcGetMemHandle", Napi::Function::New(env, IpcGetMemHandleJs));
  exports.Set("ipcOpenMemHandle", Napi::Function::New(env, IpcOpenMemHandleJs));
  exports.Set("ipcCloseMemHandle", Napi::Function::New(env, IpcCloseMemHandleJs));
  exports.Set("deviceByPciBusId", Napi::Function::New(env, DeviceByPciBusIdJs));
}

}  // namespace penstock
