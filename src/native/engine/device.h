// Per-GPU state: the primary context, and for each pool worker a pinned bounce buffer (two
// halves, so a pread into one overlaps the copy out of the other), a stream and two events.
// Allocated up front when a device is first prepared, so the first read of a process runs at
// full speed instead of paying for pinned allocations mid-read.
#pragma once
#include <cstddef>
#include <atomic>
#include <mutex>

#include "sys/cuda_api.h"
#include "sys/error_record.h"
#include "engine/issued_copy.h"

namespace penstock {

struct WorkerSlot {
  char* bounce = nullptr;  // two halves, `stride` bytes apart, page aligned
  size_t half = 0;         // bytes of data a half carries
  // Each half has two pages of slack past `half`, so an O_DIRECT piece of a full half, widened
  // to page boundaries, still fits: direct reads then move whole tasks in single requests.
  size_t stride = 0;
  CUstream stream = nullptr;
  CUevent events[2] = {nullptr, nullptr};
};

// The most pool workers (the settings allow no more).
constexpr int kMaxWorkers = 1024;

// Small reads on a JS thread into this GPU (inline_read.cc): a pinned buffer and a stream of
// their own, so they never queue behind the pool's copies. One thread uses them at a time.
struct InlineStaging {
  std::mutex mutex;
  char* buffer = nullptr;
  size_t bytes = 0;
  CUstream stream = nullptr;
  // Scratch for pieces read through scratch: a slot per reader, the calling thread's and each
  // helper's (grown on demand, never freed). Not the thread-local scratch of the pool's tasks:
  // a JS thread's thread-local objects are destroyed as the process exits, and with the CUDA
  // driver loaded, exits after such reads crashed now and then on an H200.
  char* scratch = nullptr;
  size_t scratchBytes = 0;
};

// Mid-size staged reads into this GPU (gather_read.cc): one pinned stage that covers the whole
// read, filled by many workers at once, and a few streams that carry it to the GPU in order,
// taking turns. One operation holds it at a time (`busy`); any other takes its workers' bounce
// halves instead.
constexpr int kGatherStreams = 8;
struct GatherStage {
  std::atomic<bool> busy{false};
  char* buffer = nullptr;
  size_t bytes = 0;
  CUstream streams[kGatherStreams] = {};
  // Takes the stage for an operation of `size` bytes; false when it is too small or taken.
  bool TryTake(uint64_t size);
  void Give() { busy.store(false, std::memory_order_release); }
};

// Slots are published one by one and never move or go away (workers keep pointers to them), so
// a worker reads its slot without a lock while another thread grows the set for a larger pool.
struct DeviceState {
  bool prepared = false;
  CUcontext ctx = nullptr;
  std::atomic<WorkerSlot*> slots[kMaxWorkers] = {};
  std::atomic<int> slotCount{0};
  size_t half = 0;
  int numaNode = -1;
  InlineStaging inlineStaging;
  GatherStage gather;
  IssueLane issue;
  // The calling worker's slot, or null where it has none (never for a prepared pool's worker).
  WorkerSlot* Slot(int worker) const;
};

// Restores the calling thread's previous context on scope exit, so penstock never leaves its own
// context current under another CUDA user on the main thread.
class ContextGuard {
 public:
  explicit ContextGuard(CUcontext ctx);
  ~ContextGuard();
  ContextGuard(const ContextGuard&) = delete;
  ContextGuard& operator=(const ContextGuard&) = delete;

 private:
  CUcontext previous_ = nullptr;
  bool restore_ = false;
};

ErrorRecord RequireCuda();
ErrorRecord CheckOrdinal(int ordinal);
// Retains the primary context of `ordinal`; idempotent.
ErrorRecord RetainContext(int ordinal, CUcontext* out);
// Ensures `workers` slots with bounce halves of `halfBytes` each; grows or regrows as needed.
// Bounce buffers are placed on `numaNode` (the GPU's, from sysfs) when it is >= 0, so staging
// copies cross no socket link. A new size is all or nothing: the new buffers are allocated
// before the old ones go, so a failure leaves the device as it was. It is refused with
// ERR_PENSTOCK_BUSY while operations of any environment are in flight. Then gives the device
// inline staging of at least `inlineBytes` and a gather stage of at least `gatherBytes` (0: none
// needed); a gather stage in use is left as it is, and grows at a later call.
ErrorRecord PrepareDevice(int ordinal, size_t halfBytes, int workers, int numaNode, size_t inlineBytes,
                          size_t gatherBytes);
// Gives every prepared device a slot for each of `workers` workers (before the pool grows).
ErrorRecord GrowPreparedDevices(int workers);
DeviceState* PreparedDevice(int ordinal);

ErrorRecord DeviceAlloc(int ordinal, size_t size, CUdeviceptr* out);
ErrorRecord DeviceFree(int ordinal, CUdeviceptr ptr);
struct PointerInfo {
  int device = -1;
  CUdeviceptr base = 0;
  size_t size = 0;
};
ErrorRecord QueryPointer(CUdeviceptr ptr, PointerInfo* out);

// Bytes of pinned host memory penstock holds (bounce buffers and PinnedBuffers).
void AddPinnedBytes(long long delta);
long long PinnedBytes();

}  // namespace penstock
