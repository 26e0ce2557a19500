#include "cuda_api.h"

#include <dlfcn.h>

#include <mutex>

namespace penstock {

namespace {
CudaApi g_api;
CudaState g_state;
std::mutex g_mutex;

template <typename Fn>
bool Resolve(void* lib, Fn& slot, const char* name, std::string& missing) {
  slot = reinterpret_cast<Fn>(dlsym(lib, name));
  if (!slot) missing += (missing.empty() ? "" : ", ") + std::string(name);
  return slot != nullptr;
}
}  // namespace

const CudaState& LoadCuda(const std::string& path) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_state.attempted) return g_state;
  g_state.attempted = true;
  g_state.path = path;
  // RTLD_GLOBAL-free on purpose: the driver is ours to call, not a symbol provider for others.
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* err = dlerror();
    g_state.loadError = err ? err : "dlopen failed";
    return g_state;
  }
  std::string& m = g_state.missing;
  CudaApi& a = g_api;
  Resolve(lib, a.Init, "cuInit", m);
  Resolve(lib, a.DriverGetVersion, "cuDriverGetVersion", m);
  Resolve(lib, a.GetErrorName, "cuGetErrorName", m);
  Resolve(lib, a.GetErrorString, "cuGetErrorString", m);
  Resolve(lib, a.DeviceGetCount, "cuDeviceGetCount", m);
  Resolve(lib, a.DeviceGet, "cuDeviceGet", m);
  Resolve(lib, a.DeviceGetName, "cuDeviceGetName", m);
  Resolve(lib, a.DeviceTotalMem, "cuDeviceTotalMem_v2", m);
  Resolve(lib, a.DeviceGetAttribute, "cuDeviceGetAttribute", m);
  Resolve(lib, a.DeviceGetPCIBusId, "cuDeviceGetPCIBusId", m);
  Resolve(lib, a.DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", m);
  Resolve(lib, a.CtxSetCurrent, "cuCtxSetCurrent", m);
  Resolve(lib, a.CtxGetCurrent, "cuCtxGetCurrent", m);
  Resolve(lib, a.MemAlloc, "cuMemAlloc_v2", m);
  Resolve(lib, a.MemFree, "cuMemFree_v2", m);
  Resolve(lib, a.MemGetInfo, "cuMemGetInfo_v2", m);
  Resolve(lib, a.MemGetAddressRange, "cuMemGetAddressRange_v2", m);
  Resolve(lib, a.MemHostAlloc, "cuMemHostAlloc", m);
  Resolve(lib, a.MemFreeHost, "cuMemFreeHost", m);
  Resolve(lib, a.MemcpyHtoD, "cuMemcpyHtoD_v2", m);
  Resolve(lib, a.MemcpyDtoH, "cuMemcpyDtoH_v2", m);
  Resolve(lib, a.MemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", m);
  Resolve(lib, a.MemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", m);
  Resolve(lib, a.StreamCreate, "cuStreamCreate", m);
  Resolve(lib, a.StreamSynchronize, "cuStreamSynchronize", m);
  Resolve(lib, a.StreamQuery, "cuStreamQuery", m);
  Resolve(lib, a.EventCreate, "cuEventCreate", m);
  Resolve(lib, a.EventRecord, "cuEventRecord", m);
  Resolve(lib, a.EventSynchronize, "cuEventSynchronize", m);
  Resolve(lib, a.PointerGetAttribute, "cuPointerGetAttribute", m);
  Dl_info info;
  if (a.Init && dladdr(reinterpret_cast<void*>(a.Init), &info) && info.dli_fname)
    g_state.resolvedPath = info.dli_fname;
  if (!m.empty()) {
    g_state.loadError = "the CUDA driver library lacks required functions: " + m;
    return g_state;
  }
  g_state.loaded = true;
  a.DriverGetVersion(&g_state.driverVersion);
  g_state.initResult = a.Init(0);
  if (g_state.initResult != CUDA_SUCCESS) return g_state;
  a.DeviceGetCount(&g_state.deviceCount);
  g_state.initialized = true;
  return g_state;
}

const CudaState& CudaStatus() { return g_state; }
const CudaApi& Cuda() { return g_api; }
bool CudaReady() { return g_state.initialized; }

std::string CudaErrorName(CUresult r) {
  const char* s = nullptr;
  if (g_api.GetErrorName && g_api.GetErrorName(r, &s) == CUDA_SUCCESS && s) return s;
  return "CUDA_ERROR_" + std::to_string(r);
}

std::string CudaErrorString(CUresult r) {
  const char* s = nullptr;
  if (g_api.GetErrorString && g_api.GetErrorString(r, &s) == CUDA_SUCCESS && s) return s;
  return "CUDA error " + std::to_string(r);
}

}  // namespace penstock
