// The mapped route: a worker registers the file's own page-cache pages with CUDA (through a
// read-only shared mapping) and the GPU copies straight out of them, with no CPU copy into a
// bounce buffer. Registration is slow and serialises in the driver, so it never carries a whole
// read: one worker takes pieces from the range's end while the staged runners take tasks from
// its front, and the two meet wherever their speeds put the boundary.
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>

#include "device.h"
#include "io_op.h"
#include "posix_io.h"
#include "staging_pipe.h"
#include "thread_pool.h"

namespace penstock {

ErrorRecord Operation::MapRange() {
  uint64_t start = AlignDown(spec_.fileOffset);
  mapDelta_ = spec_.fileOffset - start;
  mapSpan_ = AlignUp(spec_.fileOffset + spec_.size) - start;
  // Never touched by the CPU: only the driver's pinning faults pages in, and a truncation
  // racing with the read fails that pinning instead of raising SIGBUS in this process.
  void* m = mmap(nullptr, mapSpan_, PROT_READ, MAP_SHARED, spec_.fd, static_cast<off_t>(start));
  if (m == MAP_FAILED) return ErrorRecord::Os(errno, "mmap");
  map_ = m;
  return {};
}

namespace {

struct MappedPiece {
  bool live = false;
  uint64_t first = 0;  // task index
  uint64_t count = 0;  // tasks
  uint64_t bytes = 0;
  char* pinned = nullptr;  // the registered page span
};

}  // namespace

void Operation::RunMapped() {
  uint64_t t0 = StageTimer::Now();
  // This worker's stream and events carry the pieces: settle its staging pipelines first.
  FlushWorkerPipes();
  DeviceState* d = PreparedDevice(spec_.device);
  int w = ThreadPool::WorkerIndex();
  // Whatever is left when the mapped runner stops (the ends met, a refusal, a failure, a
  // cancellation) it takes from the front like a staged runner, so an operation needs no other
  // runner to finish. It holds one count of remaining_ of its own, so the operation cannot
  // settle before its time is added up.
  auto done = [&] {
    mappedBusyNs_ += StageTimer::Now() - t0;
    for (uint64_t got = 1; got;) {
      uint64_t i = ClaimFront(&got);
      if (got) RunTask(i * taskBytes_, std::min(taskBytes_, spec_.size - i * taskBytes_));
    }
    FlushWorkerPipes();
    FinishTask();
  };
  WorkerSlot* slot = d ? d->Slot(w) : nullptr;
  if (!slot) return done();  // staged runners claim all
  WorkerSlot& s = *slot;
  const CudaApi& cu = Cuda();
  cu.CtxSetCurrent(d->ctx);
  uint64_t per = std::max<uint64_t>(1, spec_.mappedPiece / taskBytes_);
  MappedPiece pieces[2];
  auto complete = [&](int h) {
    MappedPiece& p = pieces[h];
    if (!p.live) return;
    CUresult r;
    {
      StageTimer t(mappedWaitNs_);
      r = cu.EventSynchronize(s.events[h]);
    }
    if (r != CUDA_SUCCESS) Fail(ErrorRecord::FromCuda(r, "cuEventSynchronize"));
    CUresult u;
    {
      StageTimer t(mappedIoNs_);
      u = cu.MemHostUnregister(p.pinned);
    }
    if (r == CUDA_SUCCESS && u != CUDA_SUCCESS) {
      Fail(ErrorRecord::FromCuda(u, "cuMemHostUnregister"));
      r = u;
    }
    if (r == CUDA_SUCCESS) {
      mappedTasks_ += p.count;
      mappedBytes_ += p.bytes;
      AddProgress(p.bytes);
    }
    p.live = false;
    for (uint64_t i = 0; i < p.count; ++i) FinishTask();
  };
  int h = 0;
  for (;;) {
    if (cancelled_ || failed_) break;
    uint64_t got;
    uint64_t first = ClaimBack(per, &got);
    if (!got) break;
    uint64_t begin = first * taskBytes_;
    uint64_t bytes = std::min(spec_.size, (first + got) * taskBytes_) - begin;
    char* src = static_cast<char*>(map_) + mapDelta_ + begin;
    char* lo = static_cast<char*>(map_) + AlignDown(mapDelta_ + begin);
    char* hi = static_cast<char*>(map_) + AlignUp(mapDelta_ + begin + bytes);
    CUresult r;
    {
      StageTimer t(mappedIoNs_);
      r = cu.MemHostRegister(lo, hi - lo, CU_MEMHOSTREGISTER_READ_ONLY);
    }
    if (r != CUDA_SUCCESS) {
      // Not an error of the read: say why, and let the staged path carry these tasks and the rest.
      {
        std::lock_guard<std::mutex> lock(errorMutex_);
        mappedError_ = ErrorRecord::FromCuda(r, "cuMemHostRegister");
        mappedFailed_ = true;
      }
      complete(h ^ 1);
      mappedBusyNs_ += StageTimer::Now() - t0;
      for (uint64_t i = 0; i < got; ++i) {
        uint64_t b = (first + i) * taskBytes_;
        RunTask(b, std::min(taskBytes_, spec_.size - b));
      }
      t0 = StageTimer::Now();  // RunTask counted its own time, under the staged route
      return done();
    }
    ErrorRecord copyError = PENSTOCK_CUDA(MemcpyHtoDAsync, spec_.dev + begin, src, bytes, s.stream);
    if (copyError.ok()) copyError = PENSTOCK_CUDA(EventRecord, s.events[h], s.stream);
    if (!copyError.ok()) {
      Fail(copyError);
      cu.StreamSynchronize(s.stream);
      cu.MemHostUnregister(lo);
      for (uint64_t i = 0; i < got; ++i) FinishTask();
      break;
    }
    pieces[h] = {true, first, got, bytes, lo};
    // Registering the next piece overlaps this one's copy; the older piece is done with now.
    h ^= 1;
    complete(h);
  }
  complete(h ^ 1);
  done();
}

}  // namespace penstock
