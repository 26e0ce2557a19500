#include "engine/mapped_read.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>

#include "engine/device.h"
#include "sys/posix_io.h"
#include "engine/staging_pipe.h"
#include "sys/thread_pool.h"

namespace penstock {

namespace {

// A claim of tasks registered and copied as one piece.
struct MappedPiece {
  bool live = false;
  uint64_t count = 0;  // tasks
  uint64_t bytes = 0;
  char* pinned = nullptr;  // the registered page span
};

}  // namespace

MappedRunner::MappedRunner(const StagedSpec& spec) : spec_(spec) {
  uint64_t start = AlignDown(spec_.file.fileOffset);
  delta_ = spec_.file.fileOffset - start;
  span_ = AlignUp(spec_.file.fileOffset + spec_.file.size) - start;
  // Never touched by the CPU: only the driver's pinning faults pages in, and a truncation
  // racing with the read fails that pinning instead of raising SIGBUS in this process.
  void* m = mmap(nullptr, span_, PROT_READ, MAP_SHARED, spec_.file.fd, static_cast<off_t>(start));
  if (m == MAP_FAILED) Refuse(ErrorRecord::Os(errno, "mmap"));
  else map_ = m;
}

MappedRunner::~MappedRunner() {
  if (map_) munmap(map_, span_);
}

void MappedRunner::Refuse(ErrorRecord e) {
  std::lock_guard<std::mutex> lock(mutex_);
  refusal_ = std::move(e);
}

ErrorRecord MappedRunner::Refusal() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return refusal_;
}

void MappedRunner::Run(Job& op, DrainHold hold) {
  uint64_t t0 = NowNs();
  // This worker's stream and events carry the pieces: settle its staging pipelines first.
  FlushWorkerPipes();
  DeviceState* d = PreparedDevice(spec_.device);
  uint64_t taskBytes = spec_.file.taskSize;
  // The rest, from the front, once this share's own time is added up.
  auto carryRest = [&] {
    work_.busyNs += NowNs() - t0;
    for (Claim c; (c = op.claims().Front()).count;) op.RunTask(c.first);
    FlushWorkerPipes();
  };
  WorkerSlot* slot = d ? d->Slot(ThreadPool::WorkerIndex()) : nullptr;
  if (!slot) return carryRest();  // staged runners claim all
  WorkerSlot& s = *slot;
  const CudaApi& cu = Cuda();
  cu.CtxSetCurrent(d->ctx);
  uint64_t per = std::max<uint64_t>(1, spec_.mappedPiece / taskBytes);
  MappedPiece pieces[2];
  // Waits for half h's copy, unregisters its pages and finishes its tasks.
  auto complete = [&](int h) {
    MappedPiece& p = pieces[h];
    if (!p.live) return;
    CUresult r;
    {
      StageTimer t(work_.waitNs);
      r = cu.EventSynchronize(s.events[h]);
    }
    if (r != CUDA_SUCCESS) op.Fail(ErrorRecord::FromCuda(r, "cuEventSynchronize"));
    CUresult u;
    {
      StageTimer t(work_.ioNs);
      u = cu.MemHostUnregister(p.pinned);
    }
    if (r == CUDA_SUCCESS && u != CUDA_SUCCESS) {
      op.Fail(ErrorRecord::FromCuda(u, "cuMemHostUnregister"));
      r = u;
    }
    if (r == CUDA_SUCCESS) {
      work_.tasks += p.count;
      work_.bytes += p.bytes;
      op.AddProgress(p.bytes);
    }
    p.live = false;
    for (uint64_t i = 0; i < p.count; ++i) op.FinishTask();
  };
  int h = 0;
  for (;;) {
    if (op.Stopped()) break;
    Claim c = op.claims().Back(per, spec_.mappedClaimDivisor);
    if (!c.count) break;
    uint64_t begin = c.first * taskBytes;
    uint64_t bytes = std::min(spec_.file.size, (c.first + c.count) * taskBytes) - begin;
    char* base = static_cast<char*>(map_);
    char* src = base + delta_ + begin;
    char* lo = base + AlignDown(delta_ + begin);
    char* hi = base + AlignUp(delta_ + begin + bytes);
    CUresult r;
    {
      StageTimer t(work_.ioNs);
      r = cu.MemHostRegister(lo, hi - lo, CU_MEMHOSTREGISTER_READ_ONLY);
    }
    if (r != CUDA_SUCCESS) {
      // Not an error of the read: say why, and let the staged path carry these tasks and the rest.
      Refuse(ErrorRecord::FromCuda(r, "cuMemHostRegister"));
      complete(h ^ 1);
      work_.busyNs += NowNs() - t0;
      for (uint64_t i = 0; i < c.count; ++i) op.RunTask(c.first + i);
      t0 = NowNs();  // RunTask counted its own time, in the route's share
      return carryRest();
    }
    ErrorRecord copyError = PENSTOCK_CUDA(MemcpyHtoDAsync, spec_.dev + begin, src, bytes, s.stream);
    if (copyError.ok()) copyError = PENSTOCK_CUDA(EventRecord, s.events[h], s.stream);
    if (!copyError.ok()) {
      op.Fail(copyError);
      cu.StreamSynchronize(s.stream);
      cu.MemHostUnregister(lo);
      for (uint64_t i = 0; i < c.count; ++i) op.FinishTask();
      break;
    }
    pieces[h] = {true, c.count, bytes, lo};
    // Registering the next piece overlaps this one's copy; the older piece is done with now.
    h ^= 1;
    complete(h);
  }
  complete(h ^ 1);
  carryRest();
}

}  // namespace penstock
