// The POSIX tasks: host reads and writes, and the staged path's reads and writes through
// pinned bounce buffers. Each moves one task's byte range and times its system calls and copy
// waits into the operation's stage counters.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "device.h"
#include "io_op.h"
#include "posix_io.h"
#include "staging_pipe.h"
#include "stream_copy.h"
#include "thread_pool.h"

namespace penstock {

namespace {
constexpr uint64_t kScratchPiece = 4 << 20;
// Host reads of at least this much go through a cache-sized piece of scratch and a streaming
// copy (see stream_copy.h); smaller ones read straight into the target, which is quicker there.
constexpr uint64_t kStagePiece = 256 << 10;
constexpr uint64_t kStageMin = 1 << 20;
// A staged write task moves its bytes in at least four pieces, so the copy off the GPU of one
// piece overlaps the pwrite of the one before, even when the whole write is a single task.
constexpr uint64_t kWritePieceMin = 64 << 10;

}  // namespace

ErrorRecord Operation::HostTask(uint64_t begin, uint64_t length, uint64_t* done) {
  int refused = 0;  // errno of an O_DIRECT refusal that buffered I/O covered
  uint64_t filePos = spec_.fileOffset + begin;
  char* mem = spec_.host + begin;
  if (spec_.directFd < 0) {
    if (spec_.write) {
      // Large writes go through cache-sized scratch: the copy out of the source (from DRAM) then
      // runs here, beside the other writers, and the kernel's copy into the page cache, which
      // holds the file's inode lock and so runs one writer at a time, reads from the cache.
      // Only beside other writers: alone, the extra copy would just add to the time.
      uint64_t piece = spec_.writePiece && length >= kStageMin && tasks_ > 1 ? spec_.writePiece : length;
      char* scratch = piece < length ? Scratch(piece) : nullptr;
      if (piece < length && !scratch) return ErrorRecord::Os(ENOMEM, "posix_memalign");
      for (uint64_t pos = 0; pos < length && !cancelled_ && !failed_; pos += piece) {
        uint64_t n = std::min(piece, length - pos);
        const char* src = mem + pos;
        if (scratch) {
          memcpy(scratch, src, n);
          src = scratch;
        }
        int e;
        {
          StageTimer t(ioNs_);
          e = PwriteFull(spec_.fd, src, n, filePos + pos);
        }
        if (e) return ErrorRecord::Os(e, "pwrite");
        AddProgress(n);
        *done += n;
      }
      return {};
    }
    int err = 0;
    if (length >= kStageMin && spec_.hostStaging) {
      char* scratch = Scratch(kScratchPiece + 2 * kAlign);
      if (!scratch) return ErrorRecord::Os(ENOMEM, "posix_memalign");
      for (uint64_t pos = 0; pos < length && !cancelled_ && !failed_;) {
        uint64_t n = std::min(kStagePiece, length - pos);
        ssize_t r;
        {
          StageTimer t(ioNs_);
          r = PreadFull(spec_.fd, scratch, n, filePos + pos, false, &err);
        }
        if (r < 0) return ErrorRecord::Os(err, "pread");
        StreamCopy(mem + pos, scratch, r);
        *done += r;
        AddProgress(r);
        if (static_cast<uint64_t>(r) < n) {
          NoteEof(filePos + pos + r);
          break;
        }
        pos += n;
      }
      return {};
    }
    ssize_t r;
    {
      StageTimer t(ioNs_);
      r = PreadFull(spec_.fd, mem, length, filePos, false, &err);
    }
    if (r < 0) return ErrorRecord::Os(err, "pread");
    AddProgress(r);
    *done = r;
    if (static_cast<uint64_t>(r) < length) NoteEof(filePos + r);
    return {};
  }
  char* scratch = Scratch(kScratchPiece + 2 * kAlign);
  if (!scratch) return ErrorRecord::Os(ENOMEM, "posix_memalign");
  for (uint64_t pos = 0; pos < length && !cancelled_ && !failed_;) {
    uint64_t n = std::min(kScratchPiece, length - pos);
    uint64_t at = filePos + pos;
    if (spec_.write) {
      char* data = scratch + (at % kAlign);
      memcpy(data, mem + pos, n);
      int e;
      {
        StageTimer t(ioNs_);
        e = WriteMaybeDirect(spec_.fd, spec_.directFd, data, at, n, &refused);
        if (refused) NoteDirectRefused(std::exchange(refused, 0));
      }
      if (e) return ErrorRecord::Os(e, "pwrite");
      *done += n;
      AddProgress(n);
    } else {
      char* data;
      uint64_t got;
      int e;
      {
        StageTimer t(ioNs_);
        e = ReadMaybeDirect(spec_.fd, spec_.directFd, scratch, at, n, &data, &got, &refused);
        if (refused) NoteDirectRefused(std::exchange(refused, 0));
      }
      if (e) return ErrorRecord::Os(e, "pread");
      memcpy(mem + pos, data, got);
      *done += got;
      AddProgress(got);
      if (got < n) {
        NoteEof(at + got);
        break;
      }
    }
    pos += n;
  }
  return {};
}

ErrorRecord Operation::StagedReadTask(uint64_t begin, uint64_t length, uint64_t* done, bool* deferred) {
  int refused = 0;  // errno of an O_DIRECT refusal that buffered I/O covered
  DeviceState* d = PreparedDevice(spec_.device);
  int w = ThreadPool::WorkerIndex();
  WorkerSlot* slot = d ? d->Slot(w) : nullptr;
  if (!slot) return ErrorRecord::Misuse("ERR_PENSTOCK_INTERNAL", "device not prepared for this worker");
  if (spec_.device >= kMaxPipes)
    return ErrorRecord::Misuse("ERR_PENSTOCK_INVALID_DEVICE", "GPU ordinal past penstock's limit of 64");
  Pipe& pipe = WorkerPipe(spec_.device);
  if (pipe.slot != slot) {
    pipe.Flush();
    pipe.dev = d;
    pipe.slot = slot;
  }
  WorkerSlot& s = *slot;
  const CudaApi& cu = Cuda();
  cu.CtxSetCurrent(d->ctx);
  // The halves' slack holds the aligned span around a full piece read through O_DIRECT.
  uint64_t pieceMax = s.half;
  ErrorRecord err;
  bool recorded = false;
  for (uint64_t pos = begin; pos < begin + length;) {
    if (cancelled_ || failed_) break;
    uint64_t n = std::min(pieceMax, begin + length - pos);
    int h = pipe.nextHalf;
    char* buf = s.bounce + h * s.stride;
    {
      StageTimer t(waitNs_);
      err = pipe.Reuse(h);
    }
    if (!err.ok()) break;
    uint64_t filePos = spec_.fileOffset + pos;
    char* data;
    uint64_t got;
    int e;
    {
      StageTimer t(ioNs_);
      e = ReadMaybeDirect(spec_.fd, spec_.directFd, buf, filePos, n, &data, &got, &refused);
        if (refused) NoteDirectRefused(std::exchange(refused, 0));
    }
    if (e) {
      err = ErrorRecord::Os(e, "pread");
      break;
    }
    if (got > 0) {
      CUresult r = cu.MemcpyHtoDAsync(spec_.dev + pos, data, got, s.stream);
      if (r == CUDA_SUCCESS) r = cu.EventRecord(s.events[h], s.stream);
      if (r != CUDA_SUCCESS) {
        err = ErrorRecord::FromCuda(r, "cuMemcpyHtoDAsync");
        break;
      }
      pipe.halfSeq[h] = ++pipe.seq;
      pipe.nextHalf = h ^ 1;
      recorded = true;
      *done += got;
      AddProgress(got);
    }
    if (got < n) {
      NoteEof(filePos + got);
      break;
    }
    pos += n;
  }
  if (!err.ok() || !recorded) {
    // Nothing of ours in flight, or a failure: settle the pipeline now.
    pipe.Flush();
    return err;
  }
  // The task's bytes count once they are on the GPU: finish it when its last copy completes.
  pipe.waiting.push_back({shared_from_this(), pipe.seq});
  *deferred = true;
  return {};
}

ErrorRecord Operation::StagedWriteTask(uint64_t begin, uint64_t length, uint64_t* done) {
  int refused = 0;  // errno of an O_DIRECT refusal that buffered I/O covered
  DeviceState* d = PreparedDevice(spec_.device);
  int w = ThreadPool::WorkerIndex();
  WorkerSlot* slot = d ? d->Slot(w) : nullptr;
  if (!slot) return ErrorRecord::Misuse("ERR_PENSTOCK_INTERNAL", "device not prepared for this worker");
  WorkerSlot& s = *slot;
  const CudaApi& cu = Cuda();
  cu.CtxSetCurrent(d->ctx);
  bool direct = spec_.directFd >= 0;
  // O_DIRECT writes keep whole halves: the disk wants large requests more than the overlap.
  uint64_t pieceMax = direct ? s.half : std::min<uint64_t>(s.half, std::max(kWritePieceMin, AlignUp((length + 3) / 4)));
  uint64_t pieces = (length + pieceMax - 1) / pieceMax;
  auto place = [&](uint64_t k) {  // where piece k's bytes sit in the bounce buffer
    uint64_t filePos = spec_.fileOffset + begin + k * pieceMax;
    return s.bounce + (k & 1) * s.stride + (direct ? filePos % kAlign : 0);
  };
  auto issue = [&](uint64_t k) -> CUresult {
    uint64_t pos = begin + k * pieceMax;
    uint64_t n = std::min(pieceMax, begin + length - pos);
    CUresult r = cu.MemcpyDtoHAsync(place(k), spec_.dev + pos, n, s.stream);
    if (r == CUDA_SUCCESS) r = cu.EventRecord(s.events[k & 1], s.stream);
    return r;
  };
  // As for host writes: a copy into cache-sized scratch, beside the other writers, lets the
  // kernel's copy under the inode lock read from this core's cache instead of from wherever the
  // GPU's copy left the bytes. Only beside other writers: alone, it would just add to the time.
  bool useScratch = !direct && spec_.writePiece && tasks_ > 1;
  char* scratch = useScratch ? Scratch(pieceMax) : nullptr;
  ErrorRecord err;
  if (useScratch && !scratch) return ErrorRecord::Os(ENOMEM, "posix_memalign");
  CUresult r = issue(0);
  if (r != CUDA_SUCCESS) err = ErrorRecord::FromCuda(r, "cuMemcpyDtoHAsync");
  for (uint64_t k = 0; k < pieces && err.ok(); ++k) {
    if (cancelled_ || failed_) break;
    // Overlap: the next piece comes off the GPU while this one goes to the file.
    if (k + 1 < pieces && (r = issue(k + 1)) != CUDA_SUCCESS) {
      err = ErrorRecord::FromCuda(r, "cuMemcpyDtoHAsync");
      break;
    }
    {
      StageTimer t(waitNs_);
      r = cu.EventSynchronize(s.events[k & 1]);
    }
    if (r != CUDA_SUCCESS) {
      err = ErrorRecord::FromCuda(r, "cuEventSynchronize");
      break;
    }
    uint64_t pos = begin + k * pieceMax;
    uint64_t n = std::min(pieceMax, begin + length - pos);
    const char* src = place(k);
    if (scratch) {
      memcpy(scratch, src, n);
      src = scratch;
    }
    int e;
    {
      StageTimer t(ioNs_);
      e = WriteMaybeDirect(spec_.fd, spec_.directFd, src, spec_.fileOffset + pos, n, &refused);
        if (refused) NoteDirectRefused(std::exchange(refused, 0));
    }
    if (e) {
      err = ErrorRecord::Os(e, "pwrite");
      break;
    }
    *done += n;
    AddProgress(n);
  }
  r = cu.StreamSynchronize(s.stream);
  if (r != CUDA_SUCCESS && err.ok()) err = ErrorRecord::FromCuda(r, "cuStreamSynchronize");
  return err;
}

}  // namespace penstock
