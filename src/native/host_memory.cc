#include "host_memory.h"

#include <atomic>
#include <map>
#include <mutex>

#include "device.h"

namespace penstock {

namespace {
std::atomic<bool> g_exiting{false};

struct PinnedBlock {
  size_t size;
  bool freed;
};
std::mutex g_mutex;
std::map<void*, PinnedBlock*> g_blocks;

void FreeBlock(void* data, PinnedBlock* block) {
  if (block->freed) return;
  block->freed = true;
  // Freeing CUDA memory while the process tears CUDA down is a classic exit-time crash.
  if (g_exiting) return;
  Cuda().MemFreeHost(data);
  AddPinnedBytes(-static_cast<long long>(block->size));
}

// Runs when the ArrayBuffer is collected without an explicit free, or after one.
void ReleasePinned(Napi::Env, void* data, PinnedBlock* block) {
  std::lock_guard<std::mutex> lock(g_mutex);
  FreeBlock(data, block);
  g_blocks.erase(data);
  delete block;
}
}  // namespace

void PinnedStopFreeing() { g_exiting = true; }

Napi::ArrayBuffer PinnedAlloc(Napi::Env env, size_t size) {
  ErrorRecord e = RequireCuda();
  if (!e.ok()) ThrowRecord(env, e);
  CUcontext ctx;
  // Pinned allocations need a context; device 0's primary one serves (memory is portable).
  e = RetainContext(0, &ctx);
  if (!e.ok()) ThrowRecord(env, e);
  ContextGuard guard(ctx);
  void* p = nullptr;
  CUresult r = Cuda().MemHostAlloc(&p, size, CU_MEMHOSTALLOC_PORTABLE);
  if (r != CUDA_SUCCESS) ThrowRecord(env, ErrorRecord::FromCuda(r, "cuMemHostAlloc"));
  AddPinnedBytes(static_cast<long long>(size));
  auto* block = new PinnedBlock{size, false};
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_blocks[p] = block;
  }
  return Napi::ArrayBuffer::New(env, p, size, ReleasePinned, block);
}

void PinnedFree(Napi::Env env, Napi::ArrayBuffer buffer) {
  if (buffer.IsDetached()) return;
  void* data = buffer.Data();
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    auto it = g_blocks.find(data);
    if (it == g_blocks.end())
      ThrowRecord(env, ErrorRecord::Misuse("ERR_PENSTOCK_FOREIGN_BUFFER", "Not a penstock pinned buffer"));
    // Freed before the detach, outside of which no JS runs in between: the finalizer that the
    // detach may trigger (taking this lock) then finds the block already freed.
    FreeBlock(data, it->second);
  }
  buffer.Detach();
}

}  // namespace penstock
