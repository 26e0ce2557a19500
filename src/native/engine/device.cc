#include "engine/device.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "engine/live_operations.h"

namespace penstock {

namespace {
// Never destroyed: pool workers read slots until the process is gone.
std::mutex& g_mutex = *new std::mutex();
std::map<int, DeviceState>& g_devices = *new std::map<int, DeviceState>();

// Bytes from one bounce half to the next: the half and its two pages of slack (device.h).
size_t BounceStride(size_t halfBytes) { return halfBytes + 2 * 4096; }

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

// With g_mutex held and the device's context current: adds slots up to `workers` (streams and
// events; their bounce buffers come later), each one published only once it is complete.
static ErrorRecord GrowSlots(DeviceState& d, int workers) {
  const CudaApi& cu = Cuda();
  if (workers > kMaxWorkers) workers = kMaxWorkers;
  for (int i = d.slotCount.load(); i < workers; ++i) {
    auto slot = std::make_unique<WorkerSlot>();
    CUresult r = cu.StreamCreate(&slot->stream, CU_STREAM_NON_BLOCKING);
    if (r != CUDA_SUCCESS) return ErrorRecord::FromCuda(r, "cuStreamCreate");
    for (auto& ev : slot->events) {
      r = cu.EventCreate(&ev, CU_EVENT_DISABLE_TIMING);
      if (r != CUDA_SUCCESS) return ErrorRecord::FromCuda(r, "cuEventCreate");
    }
    d.slots[i].store(slot.release(), std::memory_order_release);
    d.slotCount.store(i + 1, std::memory_order_release);
  }
  return {};
}

// The slot's bounce buffer of the device's size, allocated now if it has none (or one of another
// size, which only a PrepareDevice with no operation in flight leaves behind).
static ErrorRecord EnsureBounce(DeviceState& d, WorkerSlot& s) {
  size_t half = d.half.load(std::memory_order_acquire);
  std::lock_guard<std::mutex> lock(s.bounceMutex);
  if (s.bounce && s.half == half) return {};
  ContextGuard guard(d.ctx);
  PinnedPages b;
  {
    NumaPreference numa(d.numaNode);
    ErrorRecord e = PinPages(2 * BounceStride(half), &b);
    if (!e.ok()) return e;
  }
  UnpinPages(&s.bouncePages);
  s.bouncePages = b;
  s.bounce = b.data;
  s.half = half;
  s.stride = BounceStride(half);
  return {};
}

// With g_mutex held and the device's context current: `bytes` of pinned memory on the device's
// NUMA node in place of `*buffer` (`*held` bytes). A failure leaves the old buffer (or none).
static ErrorRecord ReplacePinned(const DeviceState& d, size_t bytes, PinnedPages* pages, char** buffer, size_t* held) {
  PinnedPages fresh;
  ErrorRecord e;
  {
    NumaPreference numa(d.numaNode);
    e = PinPages(bytes, &fresh);
  }
  if (!e.ok()) return e;
  UnpinPages(pages);
  *pages = fresh;
  *buffer = fresh.data;
  *held = bytes;
  return {};
}

// With g_mutex held and the device's context current: inline staging of at least `bytes`
// (0: none needed).
static ErrorRecord GrowInline(DeviceState& d, size_t bytes) {
  InlineStaging& in = d.inlineStaging;
  std::lock_guard<std::mutex> use(in.mutex);
  if (bytes <= in.bytes) return {};
  if (!in.stream) {
    ErrorRecord e = PENSTOCK_CUDA(StreamCreate, &in.stream, CU_STREAM_NON_BLOCKING);
    if (!e.ok()) {
      in.stream = nullptr;
      return e;
    }
  }
  return ReplacePinned(d, bytes, &in.pages, &in.buffer, &in.bytes);
}

bool GatherStage::TryTake(uint64_t size) {
  if (size > bytes || busy.load(std::memory_order_relaxed)) return false;
  return !busy.exchange(true, std::memory_order_acquire);
}

// With the device's context current: a gather stage of at least `bytes` (0: none needed),
// replaced while it is held (TryTake), so no operation takes it half made. A stage in use is left as it is: the operation holding it keeps its buffer, and
// the stage grows at a later call.
static ErrorRecord GrowGather(DeviceState& d, size_t bytes) {
  GatherStage& g = d.gather;
  // Held while it is replaced, so no operation takes it half made; one holding it now keeps it.
  if (bytes <= g.bytes || !g.TryTake(0)) return {};
  ErrorRecord e;
  if (!g.stream) {
    e = PENSTOCK_CUDA(StreamCreate, &g.stream, CU_STREAM_NON_BLOCKING);
    if (!e.ok()) g.stream = nullptr;
  }
  if (e.ok()) e = ReplacePinned(d, bytes, &g.pages, &g.buffer, &g.bytes);
  g.Give();
  return e;
}

ErrorRecord PrepareDevice(int ordinal, size_t halfBytes, int workers, int numaNode, size_t inlineBytes,
                          size_t gatherBytes) {
  CUcontext ctx;
  ErrorRecord e = RetainContext(ordinal, &ctx);
  if (!e.ok()) return e;
  std::lock_guard<std::mutex> lock(g_mutex);
  DeviceState& d = g_devices[ordinal];
  ContextGuard guard(ctx);
  if (d.slotCount.load() > 0 && (d.half.load() != halfBytes || d.numaNode != numaNode)) {
    // Another environment's operations may be staging through these buffers right now.
    if (LiveOperations() > 0)
      return ErrorRecord::Misuse("ERR_PENSTOCK_BUSY",
                                 "The bounce buffers cannot be replaced while operations are in flight (in any thread)");
    for (int i = 0; i < d.slotCount.load(); ++i) {
      WorkerSlot* s = d.slots[i].load();
      std::lock_guard<std::mutex> slotLock(s->bounceMutex);
      UnpinPages(&s->bouncePages);
      s->bounce = nullptr;
      s->half = 0;
    }
  }
  d.half.store(halfBytes, std::memory_order_release);
  d.numaNode = numaNode;
  d.gatherWanted = std::max(d.gatherWanted, gatherBytes);
  e = GrowSlots(d, workers);
  if (!e.ok()) return e;
  // Small (a megabyte): reads on the calling thread use it from the first one on.
  e = GrowInline(d, inlineBytes);
  if (!e.ok()) return e;
  d.prepared.store(true, std::memory_order_release);
  return {};
}

ErrorRecord FillDevice(int ordinal, int slots) {
  DeviceState* d = PreparedDevice(ordinal);
  if (!d) return ErrorRecord::Misuse("ERR_PENSTOCK_INTERNAL", "device not prepared");
  for (int i = 0; i < std::min(slots, d->slotCount.load(std::memory_order_acquire)); ++i) {
    ErrorRecord e = EnsureBounce(*d, *d->slots[i].load(std::memory_order_acquire));
    if (!e.ok()) return e;
  }
  size_t gather;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    gather = d->gatherWanted;
  }
  ContextGuard guard(d->ctx);
  return GrowGather(*d, gather);
}

ErrorRecord GrowPreparedDevices(int workers) {
  std::lock_guard<std::mutex> lock(g_mutex);
  for (auto& [ordinal, d] : g_devices) {
    if (!d.prepared.load() || d.slotCount.load() >= workers) continue;
    ContextGuard guard(d.ctx);
    ErrorRecord e = GrowSlots(d, workers);
    if (!e.ok()) return e;
  }
  return {};
}

WorkerSlot* DeviceState::Slot(int worker) const {
  if (worker < 0 || worker >= slotCount.load(std::memory_order_acquire)) return nullptr;
  return slots[worker].load(std::memory_order_acquire);
}

ErrorRecord ReadySlot(DeviceState* d, int worker, WorkerSlot** out) {
  WorkerSlot* s = d ? d->Slot(worker) : nullptr;
  if (!s) return ErrorRecord::Misuse("ERR_PENSTOCK_INTERNAL", "device not prepared for this worker");
  ErrorRecord e = EnsureBounce(*d, *s);
  if (!e.ok()) return e;
  *out = s;
  return {};
}

DeviceState* PreparedDevice(int ordinal) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_devices.find(ordinal);
  return it == g_devices.end() || !it->second.prepared.load(std::memory_order_acquire) ? nullptr : &it->second;
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
