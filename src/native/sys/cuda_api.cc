#include "sys/cuda_api.h"

#include <mutex>

#include "sys/dl_library.h"

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
  DlLibrary lib;
  if (!lib.Open(g_state)) return g_state;
  std::string& m = g_state.missing;
  CudaApi& a = g_api;
  lib.Resolve(a.Init, "cuInit", &m);
  lib.Resolve(a.DriverGetVersion, "cuDriverGetVersion", &m);
  lib.Resolve(a.GetErrorName, "cuGetErrorName", &m);
  lib.Resolve(a.GetErrorString, "cuGetErrorString", &m);
  lib.Resolve(a.DeviceGetCount, "cuDeviceGetCount", &m);
  lib.Resolve(a.DeviceGet, "cuDeviceGet", &m);
  lib.Resolve(a.DeviceGetName, "cuDeviceGetName", &m);
  lib.Resolve(a.DeviceTotalMem, "cuDeviceTotalMem_v2", &m);
  lib.Resolve(a.DeviceGetAttribute, "cuDeviceGetAttribute", &m);
  lib.Resolve(a.DeviceGetPCIBusId, "cuDeviceGetPCIBusId", &m);
  lib.Resolve(a.DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", &m);
  lib.Resolve(a.CtxSetCurrent, "cuCtxSetCurrent", &m);
  lib.Resolve(a.CtxGetCurrent, "cuCtxGetCurrent", &m);
  lib.Resolve(a.MemAlloc, "cuMemAlloc_v2", &m);
  lib.Resolve(a.MemFree, "cuMemFree_v2", &m);
  lib.Resolve(a.MemGetInfo, "cuMemGetInfo_v2", &m);
  lib.Resolve(a.MemGetAddressRange, "cuMemGetAddressRange_v2", &m);
  lib.Resolve(a.MemHostAlloc, "cuMemHostAlloc", &m);
  lib.Resolve(a.MemFreeHost, "cuMemFreeHost", &m);
  lib.Resolve(a.MemcpyHtoD, "cuMemcpyHtoD_v2", &m);
  lib.Resolve(a.MemcpyDtoH, "cuMemcpyDtoH_v2", &m);
  lib.Resolve(a.MemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", &m);
  lib.Resolve(a.MemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", &m);
  lib.Resolve(a.StreamCreate, "cuStreamCreate", &m);
  lib.Resolve(a.StreamSynchronize, "cuStreamSynchronize", &m);
  lib.Resolve(a.StreamQuery, "cuStreamQuery", &m);
  lib.Resolve(a.EventCreate, "cuEventCreate", &m);
  lib.Resolve(a.EventRecord, "cuEventRecord", &m);
  lib.Resolve(a.EventSynchronize, "cuEventSynchronize", &m);
  lib.Resolve(a.PointerGetAttribute, "cuPointerGetAttribute", &m);
  std::string& hostRegister = g_state.hostRegisterMissing;
  lib.Resolve(a.MemHostRegister, "cuMemHostRegister_v2", &hostRegister);
  lib.Resolve(a.MemHostUnregister, "cuMemHostUnregister", &hostRegister);
  std::string& ipc = g_state.ipcMissing;
  lib.Resolve(a.IpcGetMemHandle, "cuIpcGetMemHandle", &ipc);
  // cuda.h maps cuIpcOpenMemHandle to the _v2 entry point since CUDA 11.
  lib.Resolve(a.IpcOpenMemHandle, "cuIpcOpenMemHandle_v2", &ipc);
  lib.Resolve(a.IpcCloseMemHandle, "cuIpcCloseMemHandle", &ipc);
  lib.Resolve(a.DeviceGetByPCIBusId, "cuDeviceGetByPCIBusId", &ipc);
  if (lib.Resolve(a.MemcpyBatchAsync, "cuMemcpyBatchAsync_v2", nullptr)) g_state.copyBatch = "cuMemcpyBatchAsync_v2";
  else if (lib.Resolve(a.MemcpyBatchAsyncFailIdx, "cuMemcpyBatchAsync", nullptr))
    g_state.copyBatch = "cuMemcpyBatchAsync";
  if (!DlLibrary::Finish(g_state, a.Init, "CUDA driver")) return g_state;
  a.DriverGetVersion(&g_state.driverVersion);
  g_state.initResult = a.Init(0);
  if (g_state.initResult != CUDA_SUCCESS) return g_state;
  a.DeviceGetCount(&g_state.deviceCount);
  g_state.initialized = true;
  return g_state;
}

const CudaState& CudaStatus() { return g_state; }

CudaState CudaStatusSnapshot() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_state;
}
const CudaApi& Cuda() { return g_api; }

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
