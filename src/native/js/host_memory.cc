#include "js/host_memory.h"

#include <map>
#include <mutex>

#include "engine/device.h"

namespace penstock {

struct PinnedBlock {
  char* data = nullptr;
  size_t size = 0;
  int users = 0;          // operations in flight that use it
  bool released = false;  // free() was called, or its ArrayBuffer collected
  bool freed = false;
};

namespace {
// Never destroyed: workers may release holds while the process exits.
std::mutex& Mutex() {
  static auto* m = new std::mutex();
  return *m;
}
std::map<char*, std::shared_ptr<PinnedBlock>>& Blocks() {
  static auto* m = new std::map<char*, std::shared_ptr<PinnedBlock>>();
  return *m;
}

// With Mutex() held.
void FreeIfUnused(const std::shared_ptr<PinnedBlock>& b) {
  if (b->freed || !b->released || b->users > 0) return;
  b->freed = true;
  CUcontext ctx = nullptr;
  // The allocation was made with device 0's primary context (portable memory).
  if (RetainContext(0, &ctx).ok()) {
    ContextGuard guard(ctx);
    Cuda().MemFreeHost(b->data);
  } else {
    Cuda().MemFreeHost(b->data);
  }
  AddPinnedBytes(-static_cast<long long>(b->size));
  Blocks().erase(b->data);
}

// The ArrayBuffer's finalizer: runs when it is collected, after a detach, or when a worker
// thread's environment is torn down (possibly while its operations still run).
void ReleasePinned(Napi::Env, void*, std::shared_ptr<PinnedBlock>* hint) {
  std::unique_ptr<std::shared_ptr<PinnedBlock>> held(hint);
  std::lock_guard<std::mutex> lock(Mutex());
  (*held)->released = true;
  FreeIfUnused(*held);
}
}  // namespace

PinnedUse::PinnedUse(std::shared_ptr<PinnedBlock> block) : block_(std::move(block)) {}

PinnedUse::~PinnedUse() {
  std::lock_guard<std::mutex> lock(Mutex());
  --block_->users;
  FreeIfUnused(block_);
}

std::unique_ptr<PinnedUse> PinnedAcquire(const char* p, size_t n) {
  std::lock_guard<std::mutex> lock(Mutex());
  auto& blocks = Blocks();
  auto it = blocks.upper_bound(const_cast<char*>(p));
  if (it == blocks.begin()) return nullptr;
  --it;
  const auto& b = it->second;
  if (p < b->data || static_cast<size_t>(p - b->data) + n > b->size) return nullptr;
  ++b->users;
  return std::make_unique<PinnedUse>(b);
}

Napi::ArrayBuffer PinnedAlloc(Napi::Env env, size_t size) {
  ErrorRecord e = RequireCuda();
  if (!e.ok()) ThrowRecord(env, e);
  CUcontext ctx;
  // Pinned allocations need a context; device 0's primary one serves (memory is portable).
  e = RetainContext(0, &ctx);
  if (!e.ok()) ThrowRecord(env, e);
  ContextGuard guard(ctx);
  void* p = nullptr;
  ThrowIfError(env, PENSTOCK_CUDA(MemHostAlloc, &p, size, CU_MEMHOSTALLOC_PORTABLE));
  AddPinnedBytes(static_cast<long long>(size));
  auto block = std::make_shared<PinnedBlock>();
  block->data = static_cast<char*>(p);
  block->size = size;
  {
    std::lock_guard<std::mutex> lock(Mutex());
    Blocks()[block->data] = block;
  }
  return Napi::ArrayBuffer::New(env, p, size, ReleasePinned, new std::shared_ptr<PinnedBlock>(block));
}

void PinnedFree(Napi::Env env, Napi::ArrayBuffer buffer) {
  if (buffer.IsDetached()) return;
  char* data = static_cast<char*>(buffer.Data());
  std::shared_ptr<PinnedBlock> block;
  {
    std::lock_guard<std::mutex> lock(Mutex());
    auto it = Blocks().find(data);
    if (it == Blocks().end() || it->second->released || it->second->size != buffer.ByteLength())
      ThrowRecord(env, ErrorRecord::Misuse("ERR_PENSTOCK_FOREIGN_BUFFER", "Not a penstock pinned buffer"));
    if (it->second->users > 0)
      ThrowRecord(env, ErrorRecord::Misuse("ERR_PENSTOCK_BUFFER_BUSY", "This PinnedBuffer is in use by an operation in flight"));
    block = it->second;
    block->released = true;
  }
  // Views become empty first; the memory goes after, once nothing can reach it.
  buffer.Detach();
  std::lock_guard<std::mutex> lock(Mutex());
  FreeIfUnused(block);
}

}  // namespace penstock
