// Pinned host memory for penstock's own staging (bounce buffers, inline and gather stages).
//
// cuMemHostAlloc allocates, zeroes and pins in one driver call that serialises across threads:
// 16 bounce buffers of 16 MiB took 135-155 ms on the H100 machine (about 1.7 GiB/s), on the
// critical path of a fresh process's first load. Anonymous memory faulted in by the thread that
// asks for it (transparent huge pages where the kernel gives them) and then registered with
// cuMemHostRegister pins the same 256 MiB in 14 ms from 16 threads, 36 ms from one
// (H100 machine, 2026-12-08). Where registration is refused (a driver without
// it, a kernel that will not pin), the driver's own allocation is the fallback.
#pragma once
#include <cstddef>

#include "sys/error_record.h"

namespace penstock {

struct PinnedPages {
  char* data = nullptr;   // `bytes` usable bytes, page aligned (2 MiB aligned when registered)
  size_t bytes = 0;
  void* mapping = nullptr;  // the anonymous mapping around `data` (registered memory only)
  size_t mappingBytes = 0;
};

// Pins `bytes` of host memory (portable: any context may copy from it), on the calling thread's
// NUMA preference. Counts it in PinnedBytes().
ErrorRecord PinPages(size_t bytes, PinnedPages* out);
// Unpins and frees what PinPages gave (nothing for an empty one).
void UnpinPages(PinnedPages* pages);

// Bytes of pinned host memory penstock holds (staging and PinnedBuffers), and its bookkeeping for
// pinned memory allocated elsewhere.
void AddPinnedBytes(long long delta);
long long PinnedBytes();

}  // namespace penstock
