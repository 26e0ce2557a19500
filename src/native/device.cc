#include "device.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <mutex>

namespace penstock {

namespace {
std::mutex g_mutex;
std::map<int, DeviceState> g_devices;
std::atomic<long long> g_pinned{0};

void FreeSlot(WorkerSlot& s) {
  const CudaApi& cu = Cuda();
  if (s.bounce) {
    cu.MemFreeHost(s.bounce);
    AddPinnedBytes(-static_cast<long long>(2 * s.stride));
  }
  s.bounce = nullptr;
  s.half = 0;
  s.stride = 0;
  // Streams and events are kept: they are cheap and reusable across bounce sizes.
}
// Prefers memory of one NUMA node for this thread's allocations until destroyed. Raw syscalls,
// so the addon needs no libnuma; failure (no NUMA, a kernel without it) just means no preference.
class NumaPreference {
 public:
  explicit NumaPreference(int node) {
    if (node < 0 || node >= 64) return;
    unsigned long mask = 1UL << node;
    constexpr int kMpolPreferred = 1;
    active_ = syscall(SYS_set_mempolicy, kMpolPreferred, &mask, 64) == 0;
  }
  ~NumaPreference() {
    if (active_) syscall(SYS_set_mempolicy, 0 /* MPOL_DEFAULT */, nullptr, 0);
  }

 private:
  bool active_ = false;
};
}  // namespace

void AddPinnedBytes(long long delta) { g_pinned += delta; }
long long PinnedBytes() { return g_pinned.load(); }

ContextGuard::ContextGuard(CUcontext ctx) {
  const CudaApi& cu = Cuda();
  if (cu.CtxGetCurrent(&previous_) != CUDA_SUCCESS) previous_ = nullptr;
  if (previous_ != ctx) {
    cu.CtxSetCurrent(ctx);
    restore_ = true;
  }
}

ContextGuard::~ContextGuard() {
  if (restore_) Cuda().CtxSetCurrent(previous_);
}

ErrorRecord RequireCuda() {
  const CudaState& s = CudaStatus();
  if (s.initialized) return {};
  if (!s.attempted)
    return ErrorRecord::Misuse("ERR_PENSTOCK_NO_CUDA", "The CUDA driver has not been loaded");
  if (!s.loaded)
    return ErrorRecord::Misuse("ERR_PENSTOCK_NO_CUDA",
                               "No usable CUDA driver (" + s.path + "): " + s.loadError);
  return ErrorRecord::FromCuda(s.initResult, "cuInit");
}

ErrorRecord CheckOrdinal(int ordinal) {
  ErrorRecord e = RequireCuda();
  if (!e.ok()) return e;
  if (ordinal < 0 || ordinal >= CudaStatus().deviceCount)
    return ErrorRecord::Misuse("ERR_PENSTOCK_INVALID_DEVICE",
                               "No GPU with ordinal " + std::to_string(ordinal) + " (this machine has " +
                                   std::to_string(CudaStatus().deviceCount) + ")");
  return {};
}

ErrorRecord RetainContext(int ordinal, CUcontext* out) {
  ErrorRecord e = CheckOrdinal(ordinal);
  if (!e.ok()) return e;
  std::lock_guard<std::mutex> lock(g_mutex);
  DeviceState& d = g_devices[ordinal];
  if (!d.ctx) {
    const CudaApi& cu = Cuda();
    CUdevice dev;
    CUresult r = cu.DeviceGet(&dev, ordinal);
    if (r != CUDA_SUCCESS) return ErrorRecord::FromCuda(r, "cuDeviceGet");
    r = cu.DevicePrimaryCtxRetain(&d.ctx, dev);
    if (r != CUDA_SUCCESS) {
      d.ctx = nullptr;
      return ErrorRecord::FromCuda(r, "cuDevicePrimaryCtxRetain");
    }
  }
  *out = d.ctx;
  return {};
}

ErrorRecord PrepareDevice(int ordinal, size_t halfBytes, int workers, int numaNode) {
  CUcontext ctx;
  ErrorRecord e = RetainContext(ordinal, &ctx);
  if (!e.ok()) return e;
  std::lock_guard<std::mutex> lock(g_mutex);
  DeviceState& d = g_devices[ordinal];
  const CudaApi& cu = Cuda();
  ContextGuard guard(ctx);
  if (d.half != halfBytes || d.numaNode != numaNode)
    for (auto& s : d.slots) FreeSlot(s);
  d.numaNode = numaNode;
  NumaPreference numa(numaNode);
  if (static_cast<int>(d.slots.size()) < workers) d.slots.resize(workers);
  d.half = halfBytes;
  for (auto& s : d.slots) {
    if (!s.stream) {
      CUresult r = cu.StreamCreate(&s.stream, CU_STREAM_NON_BLOCKING);
      if (r != CUDA_SUCCESS) return ErrorRecord::FromCuda(r, "cuStreamCreate");
      for (auto& ev : s.events) {
        r = cu.EventCreate(&ev, CU_EVENT_DISABLE_TIMING);
        if (r != CUDA_SUCCESS) return ErrorRecord::FromCuda(r, "cuEventCreate");
      }
    }
    if (!s.bounce) {
      void* p = nullptr;
      // Portable: a bounce buffer of one device's slot may be copied from by any context.
      size_t stride = halfBytes + 2 * 4096;
      CUresult r = cu.MemHostAlloc(&p, 2 * stride, CU_MEMHOSTALLOC_PORTABLE);
      if (r != CUDA_SUCCESS) return ErrorRecord::FromCuda(r, "cuMemHostAlloc");
      s.bounce = static_cast<char*>(p);
      s.half = halfBytes;
      s.stride = stride;
      AddPinnedBytes(static_cast<long long>(2 * stride));
    }
  }
  d.prepared = true;
  return {};
}

DeviceState* PreparedDevice(int ordinal) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_devices.find(ordinal);
  if (it == g_devices.end() || !it->second.prepared) return nullptr;
  return &it->second;
}

ErrorRecord DeviceAlloc(int ordinal, size_t size, CUdeviceptr* out) {
  CUcontext ctx;
  ErrorRecord e = RetainContext(ordinal, &ctx);
  if (!e.ok()) return e;
  ContextGuard guard(ctx);
  CUresult r = Cuda().MemAlloc(out, size);
  if (r != CUDA_SUCCESS) return ErrorRecord::FromCuda(r, "cuMemAlloc");
  return {};
}

ErrorRecord DeviceFree(int ordinal, CUdeviceptr ptr) {
  CUcontext ctx;
  ErrorRecord e = RetainContext(ordinal, &ctx);
  if (!e.ok()) return e;
  ContextGuard guard(ctx);
  CUresult r = Cuda().MemFree(ptr);
  if (r != CUDA_SUCCESS) return ErrorRecord::FromCuda(r, "cuMemFree");
  return {};
}

ErrorRecord QueryPointer(CUdeviceptr ptr, PointerInfo* out) {
  ErrorRecord e = RequireCuda();
  if (!e.ok()) return e;
  const CudaApi& cu = Cuda();
  unsigned memType = 0;
  CUresult r = cu.PointerGetAttribute(&memType, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, ptr);
  if (r != CUDA_SUCCESS || memType != CU_MEMORYTYPE_DEVICE)
    return ErrorRecord::Misuse("ERR_PENSTOCK_NOT_DEVICE_MEMORY",
                               "The pointer is not CUDA device memory known to the driver");
  int ordinal = -1;
  r = cu.PointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ptr);
  if (r != CUDA_SUCCESS) return ErrorRecord::FromCuda(r, "cuPointerGetAttribute");
  CUcontext ctx;
  e = RetainContext(ordinal, &ctx);
  if (!e.ok()) return e;
  ContextGuard guard(ctx);
  CUdeviceptr base = 0;
  size_t size = 0;
  r = cu.MemGetAddressRange(&base, &size, ptr);
  if (r != CUDA_SUCCESS) return ErrorRecord::FromCuda(r, "cuMemGetAddressRange");
  out->device = ordinal;
  out->base = base;
  out->size = size;
  return {};
}

}  // namespace penstock
