#include "cuda_api.h"

#include <dlfcn.h>

#include <mutex>

#include "dl_util.h"

namespace penstock {

namespace {
CudaApi g_api;  // plain function pointers: nothing to destroy
// Never destroyed: pool workers and exit handlers read it until the process is gone.
CudaState& g_state = *new CudaState();
std::mutex g_mutex;

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
  ResolveSymbol(lib, a.Init, "cuInit", &m);
  ResolveSymbol(lib, a.DriverGetVersion, "cuDriverGetVersion", &m);
  ResolveSymbol(lib, a.GetErrorName, "cuGetErrorName", &m);
  ResolveSymbol(lib, a.GetErrorString, "cuGetErrorString", &m);
  ResolveSymbol(lib, a.DeviceGetCount, "cuDeviceGetCount", &m);
  ResolveSymbol(lib, a.DeviceGet, "cuDeviceGet", &m);
  ResolveSymbol(lib, a.DeviceGetName, "cuDeviceGetName", &m);
  ResolveSymbol(lib, a.DeviceTotalMem, "cuDeviceTotalMem_v2", &m);
  ResolveSymbol(lib, a.DeviceGetAttribute, "cuDeviceGetAttribute", &m);
  ResolveSymbol(lib, a.DeviceGetPCIBusId, "cuDeviceGetPCIBusId", &m);
  ResolveSymbol(lib, a.DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", &m);
  ResolveSymbol(lib, a.CtxSetCurrent, "cuCtxSetCurrent", &m);
  ResolveSymbol(lib, a.CtxGetCurrent, "cuCtxGetCurrent", &m);
  ResolveSymbol(lib, a.MemAlloc, "cuMemAlloc_v2", &m);
  ResolveSymbol(lib, a.MemFree, "cuMemFree_v2", &m);
  ResolveSymbol(lib, a.MemGetInfo, "cuMemGetInfo_v2", &m);
  ResolveSymbol(lib, a.MemGetAddressRange, "cuMemGetAddressRange_v2", &m);
  ResolveSymbol(lib, a.MemHostAlloc, "cuMemHostAlloc", &m);
  ResolveSymbol(lib, a.MemFreeHost, "cuMemFreeHost", &m);
  ResolveSymbol(lib, a.MemcpyHtoD, "cuMemcpyHtoD_v2", &m);
  ResolveSymbol(lib, a.MemcpyDtoH, "cuMemcpyDtoH_v2", &m);
  ResolveSymbol(lib, a.MemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", &m);
  ResolveSymbol(lib, a.MemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", &m);
  ResolveSymbol(lib, a.StreamCreate, "cuStreamCreate", &m);
  ResolveSymbol(lib, a.StreamSynchronize, "cuStreamSynchronize", &m);
  ResolveSymbol(lib, a.StreamQuery, "cuStreamQuery", &m);
  ResolveSymbol(lib, a.EventCreate, "cuEventCreate", &m);
  ResolveSymbol(lib, a.EventRecord, "cuEventRecord", &m);
  ResolveSymbol(lib, a.EventSynchronize, "cuEventSynchronize", &m);
  ResolveSymbol(lib, a.PointerGetAttribute, "cuPointerGetAttribute", &m);
  ResolveSymbol(lib, a.MemHostRegister, "cuMemHostRegister_v2", nullptr);
  ResolveSymbol(lib, a.MemHostUnregister, "cuMemHostUnregister", nullptr);
  std::string& ipc = g_state.ipcMissing;
  ResolveSymbol(lib, a.IpcGetMemHandle, "cuIpcGetMemHandle", &ipc);
  // cuda.h maps cuIpcOpenMemHandle to the _v2 entry point since CUDA 11.
  ResolveSymbol(lib, a.IpcOpenMemHandle, "cuIpcOpenMemHandle_v2", &ipc);
  ResolveSymbol(lib, a.IpcCloseMemHandle, "cuIpcCloseMemHandle", &ipc);
  ResolveSymbol(lib, a.DeviceGetByPCIBusId, "cuDeviceGetByPCIBusId", &ipc);
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
