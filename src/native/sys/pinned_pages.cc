#include "sys/pinned_pages.h"

#include <sys/mman.h>

#include <cerrno>
#include <unistd.h>

#include <atomic>
#include <cstdint>

#include "sys/cuda_api.h"

namespace penstock {

namespace {
std::atomic<long long> g_pinned{0};

constexpr size_t kHugePage = 2u << 20;
constexpr size_t kPage = 4096;

// Registration refused once is not tried again: each refusal costs a driver call.
std::atomic<bool> g_registerRefused{false};

ErrorRecord RegisterFresh(size_t bytes, PinnedPages* out) {
  const CudaApi& cu = Cuda();
  size_t length = bytes + kHugePage;
  void* map = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED) return ErrorRecord::Os(errno, "mmap");
  uintptr_t at = (reinterpret_cast<uintptr_t>(map) + kHugePage - 1) / kHugePage * kHugePage;
  char* data = reinterpret_cast<char*>(at);
#ifdef MADV_HUGEPAGE
  // Advice only: without huge pages the faults below take longer, nothing else changes.
  madvise(data, bytes, MADV_HUGEPAGE);
#endif
  // A fork (every child process Node starts) would otherwise share these pages copy-on-write,
  // and the next write here could move them away from the physical pages the GPU copies from.
  if (madvise(map, length, MADV_DONTFORK) != 0) {
    int err = errno;
    munmap(map, length);
    return ErrorRecord::Os(err, "madvise");
  }
  // Faulted in here, by the thread that will use it, rather than page by page inside the
  // driver's registration (which holds a lock other threads' registrations wait on).
  for (size_t off = 0; off < bytes; off += kPage) reinterpret_cast<volatile char*>(data)[off] = 0;
  CUresult r = cu.MemHostRegister(data, bytes, CU_MEMHOSTREGISTER_PORTABLE);
  if (r != CUDA_SUCCESS) {
    munmap(map, length);
    return ErrorRecord::FromCuda(r, "cuMemHostRegister");
  }
  out->data = data;
  out->bytes = bytes;
  out->mapping = map;
  out->mappingBytes = length;
  return {};
}
}  // namespace

void AddPinnedBytes(long long delta) { g_pinned += delta; }
long long PinnedBytes() { return g_pinned.load(); }

ErrorRecord PinPages(size_t bytes, PinnedPages* out) {
  bytes = (bytes + kPage - 1) / kPage * kPage;
  const CudaApi& cu = Cuda();
  ErrorRecord e;
  if (cu.MemHostRegister && cu.MemHostUnregister && !g_registerRefused.load(std::memory_order_relaxed)) {
    e = RegisterFresh(bytes, out);
    if (e.ok()) {
      AddPinnedBytes(static_cast<long long>(bytes));
      return e;
    }
    if (e.kind == ErrorRecord::Kind::Cuda) g_registerRefused.store(true, std::memory_order_relaxed);
  }
  void* p = nullptr;
  e = PENSTOCK_CUDA(MemHostAlloc, &p, bytes, CU_MEMHOSTALLOC_PORTABLE);
  if (!e.ok()) return e;
  out->data = static_cast<char*>(p);
  out->bytes = bytes;
  out->mapping = nullptr;
  out->mappingBytes = 0;
  AddPinnedBytes(static_cast<long long>(bytes));
  return {};
}

void UnpinPages(PinnedPages* pages) {
  if (!pages->data) return;
  const CudaApi& cu = Cuda();
  if (pages->mapping) {
    cu.MemHostUnregister(pages->data);
    munmap(pages->mapping, pages->mappingBytes);
  } else {
    cu.MemFreeHost(pages->data);
  }
  AddPinnedBytes(-static_cast<long long>(pages->bytes));
  *pages = PinnedPages{};
}

}  // namespace penstock
