// Per-GPU state: the primary context, and for each pool worker a pinned bounce buffer (two
// halves, so a pread into one overlaps the copy out of the other), a stream and two events.
// Preparing a device makes the slots (streams and events: cheap) at once; the pinned memory,
// (sys/pinned_pages.h: about 1 ms per 16 MiB, in parallel), is filled in on another
// thread (FillDevice), while a worker that needs its own buffer first allocates it then: a
// first load starts moving data with the first buffers instead of after all of them.
#pragma once
#include <cstddef>
#include <atomic>
#include <mutex>

#include "sys/cuda_api.h"
#include "sys/error_record.h"
#include "sys/pinned_pages.h"
#include "engine/issued_copy.h"

namespace penstock {

struct WorkerSlot {
  std::mutex bounceMutex;  // held while the bounce buffer is allocated or replaced
  PinnedPages bouncePages;  // owns `bounce`
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
  PinnedPages pages;  // owns `buffer`
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
// read, filled by many workers at once, and one stream that carries it to the GPU in order
// (copies taking turns on 2, 4 or 8 streams measured no faster). One operation holds it at a
// time (`busy`); any other takes its workers' bounce halves instead.
struct GatherStage {
  std::atomic<bool> busy{false};
  PinnedPages pages;  // owns `buffer`
  char* buffer = nullptr;
  size_t bytes = 0;
  CUstream stream = nullptr;
  // Takes the stage for an operation of `size` bytes; false when it is too small or taken.
  bool TryTake(uint64_t size);
  void Give() { busy.store(false, std::memory_order_release); }
};

// Slots are published one by one and never move or go away (workers keep pointers to them), so
// a worker reads its slot without a lock while another thread grows the set for a larger pool.
struct DeviceState {
  std::atomic<bool> prepared{false};
  CUcontext ctx = nullptr;
  std::atomic<WorkerSlot*> slots[kMaxWorkers] = {};
  std::atomic<int> slotCount{0};
  std::atomic<size_t> half{0};
  int numaNode = -1;
  size_t gatherWanted = 0;  // the gather stage FillDevice gives the device
  InlineStaging inlineStaging;
  GatherStage gather;
  IssueLane issue;
  // The calling worker's slot, or null where it has none (never for a prepared pool's worker).
  // Its stream and events are ready; its bounce buffer may not be yet (ReadySlot).
  WorkerSlot* Slot(int worker) const;
};

// The calling worker's slot with its bounce buffer, allocated now if it is not yet.
ErrorRecord ReadySlot(DeviceState* d, int worker, WorkerSlot** out);

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
// Ensures `workers` slots whose bounce halves are to be `halfBytes` each, and inline staging of
// at least `inlineBytes`. Bounce buffers are placed on `numaNode` (the GPU's, from sysfs) when it
// is >= 0, so staging copies cross no socket link. A new size drops the old buffers (each is
// allocated again at its next use, or by FillDevice); it is refused with ERR_PENSTOCK_BUSY while
// operations of any environment are in flight. `gatherBytes`: the gather stage FillDevice gives
// the device (0: none needed).
ErrorRecord PrepareDevice(int ordinal, size_t halfBytes, int workers, int numaNode, size_t inlineBytes,
                          size_t gatherBytes);
// Allocates what PrepareDevice left for later: the bounce buffers of the first `slots` slots (the
// workers a planned transfer will keep busy; the others allocate theirs at first use), then the
// gather stage (a stage in use is left as it is, and grows at a later call). Any thread.
ErrorRecord FillDevice(int ordinal, int slots);
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

}  // namespace penstock
