// The few CUDA driver types and entry points penstock uses, declared here and resolved with dlopen
// at run time, so the addon builds with a plain C++ compiler and loads on machines without CUDA.
#pragma once
#include <cstddef>
#include <string>

#include "sys/dl_library.h"

namespace penstock {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st*;
using CUstream = struct CUstream_st*;
using CUevent = struct CUevent_st*;

constexpr CUresult CUDA_SUCCESS = 0;
constexpr CUresult CUDA_ERROR_INVALID_VALUE = 1;
constexpr CUresult CUDA_ERROR_NOT_READY = 600;
constexpr int CU_POINTER_ATTRIBUTE_CONTEXT = 1;
constexpr int CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2;
constexpr int CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9;
constexpr unsigned CU_MEMORYTYPE_DEVICE = 2;
constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;
constexpr unsigned CU_MEMHOSTALLOC_PORTABLE = 0x01;
constexpr unsigned CU_STREAM_NON_BLOCKING = 0x1;
constexpr unsigned CU_EVENT_DISABLE_TIMING = 0x2;
constexpr unsigned CU_MEMHOSTREGISTER_PORTABLE = 0x01;
constexpr unsigned CU_MEMHOSTREGISTER_READ_ONLY = 0x08;
constexpr int CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE = 10;
constexpr int CU_POINTER_ATTRIBUTE_RANGE_START_ADDR = 11;
constexpr int CU_POINTER_ATTRIBUTE_RANGE_SIZE = 12;
constexpr int CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE = 17;
constexpr unsigned CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS = 0x1;
constexpr size_t CU_IPC_HANDLE_SIZE = 64;

// cuMemcpyBatchAsync's attributes for a run of copies (CUDA 12.8+), laid out as cuda.h lays out
// CUmemcpyAttributes: the source access order, location hints (used for managed memory only)
// and flags.
struct CUmemLocation {
  int type;
  int id;
};
struct CUmemcpyAttributes {
  int srcAccessOrder;
  CUmemLocation srcLocHint;
  CUmemLocation dstLocHint;
  unsigned flags;
};
static_assert(sizeof(CUmemcpyAttributes) == 24, "CUmemcpyAttributes is 24 bytes in cuda.h");
// The sources are read in stream order, like any asynchronous copy's.
constexpr int CU_MEMCPY_SRC_ACCESS_ORDER_STREAM = 1;
constexpr int CU_MEM_LOCATION_TYPE_DEVICE = 1;
constexpr int CU_MEM_LOCATION_TYPE_HOST = 2;

// Passed by value, as the driver declares it: 64 opaque bytes naming one cuMemAlloc allocation.
struct CUipcMemHandle {
  char reserved[CU_IPC_HANDLE_SIZE];
};

// One table of function pointers; nullptr where the symbol was not found.
struct CudaApi {
  CUresult (*Init)(unsigned) = nullptr;
  CUresult (*DriverGetVersion)(int*) = nullptr;
  CUresult (*GetErrorName)(CUresult, const char**) = nullptr;
  CUresult (*GetErrorString)(CUresult, const char**) = nullptr;
  CUresult (*DeviceGetCount)(int*) = nullptr;
  CUresult (*DeviceGet)(CUdevice*, int) = nullptr;
  CUresult (*DeviceGetName)(char*, int, CUdevice) = nullptr;
  CUresult (*DeviceTotalMem)(size_t*, CUdevice) = nullptr;
  CUresult (*DeviceGetAttribute)(int*, int, CUdevice) = nullptr;
  CUresult (*DeviceGetPCIBusId)(char*, int, CUdevice) = nullptr;
  CUresult (*DevicePrimaryCtxRetain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*CtxSetCurrent)(CUcontext) = nullptr;
  CUresult (*CtxGetCurrent)(CUcontext*) = nullptr;
  CUresult (*MemAlloc)(CUdeviceptr*, size_t) = nullptr;
  CUresult (*MemFree)(CUdeviceptr) = nullptr;
  CUresult (*MemGetInfo)(size_t*, size_t*) = nullptr;
  CUresult (*MemGetAddressRange)(CUdeviceptr*, size_t*, CUdeviceptr) = nullptr;
  CUresult (*MemHostAlloc)(void**, size_t, unsigned) = nullptr;
  CUresult (*MemFreeHost)(void*) = nullptr;
  CUresult (*MemcpyHtoD)(CUdeviceptr, const void*, size_t) = nullptr;
  CUresult (*MemcpyDtoH)(void*, CUdeviceptr, size_t) = nullptr;
  CUresult (*MemcpyHtoDAsync)(CUdeviceptr, const void*, size_t, CUstream) = nullptr;
  CUresult (*MemcpyDtoHAsync)(void*, CUdeviceptr, size_t, CUstream) = nullptr;
  CUresult (*StreamCreate)(CUstream*, unsigned) = nullptr;
  CUresult (*StreamSynchronize)(CUstream) = nullptr;
  CUresult (*StreamQuery)(CUstream) = nullptr;
  CUresult (*EventCreate)(CUevent*, unsigned) = nullptr;
  CUresult (*EventRecord)(CUevent, CUstream) = nullptr;
  CUresult (*EventSynchronize)(CUevent) = nullptr;
  CUresult (*PointerGetAttribute)(void*, int, CUdeviceptr) = nullptr;
  // Optional: without them there is no mapped route (CudaState::hostRegisterMissing names them).
  CUresult (*MemHostRegister)(void*, size_t, unsigned) = nullptr;
  CUresult (*MemHostUnregister)(void*) = nullptr;
  // Optional: without them there is no CUDA IPC hand-off (CudaState::ipcMissing names them).
  CUresult (*IpcGetMemHandle)(CUipcMemHandle*, CUdeviceptr) = nullptr;
  CUresult (*IpcOpenMemHandle)(CUdeviceptr*, CUipcMemHandle, unsigned) = nullptr;
  CUresult (*IpcCloseMemHandle)(CUdeviceptr) = nullptr;
  CUresult (*DeviceGetByPCIBusId)(CUdevice*, const char*) = nullptr;
  // Optional: many copies in one call (CudaState::copyBatch names the one found). CUDA 13
  // drivers export the form without failIdx as cuMemcpyBatchAsync_v2; 12.8 and 12.9 have only
  // cuMemcpyBatchAsync, with it. At most one of the two is set.
  CUresult (*MemcpyBatchAsync)(CUdeviceptr*, CUdeviceptr*, size_t*, size_t, CUmemcpyAttributes*, size_t*, size_t,
                               CUstream) = nullptr;
  CUresult (*MemcpyBatchAsyncFailIdx)(CUdeviceptr*, CUdeviceptr*, size_t*, size_t, CUmemcpyAttributes*, size_t*,
                                      size_t, size_t*, CUstream) = nullptr;
};

struct CudaState : LibraryState {
  bool initialized = false;
  // comma-separated page-registration symbols that were absent (no mapped route)
  std::string hostRegisterMissing;
  std::string ipcMissing;  // comma-separated IPC symbols that were absent (IPC unavailable)
  std::string copyBatch;   // the batch-copy symbol resolved; empty: none (copies one call each)
  CUresult initResult = 0;
  int driverVersion = 0;
  int deviceCount = 0;
};

// Loads and initialises the driver once per process; later calls return the first outcome.
const CudaState& LoadCuda(const std::string& path);
const CudaState& CudaStatus();
// A copy taken under the load's lock: waits for a load under way on another thread.
CudaState CudaStatusSnapshot();
const CudaApi& Cuda();

// "CUDA_ERROR_OUT_OF_MEMORY" and its sentence, or a numeric fallback when the driver can't say.
std::string CudaErrorName(CUresult r);
std::string CudaErrorString(CUresult r);

}  // namespace penstock
