// The POSIX tasks: host reads and writes, and the staged path's reads and writes through
// pinned bounce buffers. Each moves one task's byte range and times its system calls and copy
// waits into the operation's stage counters.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "engine/device.h"
#include "engine/file_tasks.h"
#include "sys/posix_io.h"
#include "engine/read_scratch.h"
#include "engine/staging_pipe.h"
#include "sys/thread_pool.h"

namespace penstock {

ErrorRecord HostTransfer::Run(uint64_t index, uint64_t* done, bool* leftInFlight) {
  FlushWorkerPipes();  // a worker's staged reads left in flight are settled before other work
  uint64_t begin = TaskBegin(index), length = TaskLength(index);
  int refused = 0;  // errno of an O_DIRECT refusal that buffered I/O covered
  uint64_t filePos = file_.fileOffset + begin;
  char* mem = spec_.host + begin;
  if (file_.directFd < 0) {
    if (file_.write) {
      // Writes through cache-sized scratch (when planned): the copy out of the source (from DRAM)
      // then runs here, beside the other writers, and the kernel's copy into the page cache,
      // which holds the file's inode lock and so runs one writer at a time, reads from the cache.
      uint64_t piece = file_.writePiece ? file_.writePiece : length;
      char* scratch = piece < length ? Scratch(piece) : nullptr;
      if (piece < length && !scratch) return ErrorRecord::Os(ENOMEM, "posix_memalign");
      for (uint64_t pos = 0; pos < length && !job().Stopped(); pos += piece) {
        uint64_t n = std::min(piece, length - pos);
        const char* src = mem + pos;
        if (scratch) {
          memcpy(scratch, src, n);
          src = scratch;
        }
        int e;
        {
          StageTimer t(job().Work().ioNs);
          e = PwriteFull(file_.fd, src, n, filePos + pos);
        }
        if (e) return ErrorRecord::Os(e, "pwrite");
        job().AddProgress(n);
        *done += n;
      }
      return {};
    }
    int err = 0;
    if (spec_.hostStagePiece) {
      // Through cache-sized scratch and streaming stores, as planned.
      return ReadThroughScratch(mem, filePos, length, spec_.hostStagePiece, [&](uint64_t n) {
        *done += n;
        job().AddProgress(n);
      });
    }
    ssize_t r;
    {
      StageTimer t(job().Work().ioNs);
      r = PreadFull(file_.fd, mem, length, filePos, false, &err);
    }
    if (r < 0) return ErrorRecord::Os(err, "pread");
    job().AddProgress(r);
    *done = r;
    if (static_cast<uint64_t>(r) < length) NoteEof(filePos + r);
    return {};
  }
  // O_DIRECT goes through aligned scratch: pieces of directPiece, widened to page boundaries.
  char* scratch = Scratch(spec_.directPiece + 2 * kAlign);
  if (!scratch) return ErrorRecord::Os(ENOMEM, "posix_memalign");
  for (uint64_t pos = 0; pos < length && !job().Stopped();) {
    uint64_t n = std::min(spec_.directPiece, length - pos);
    uint64_t at = filePos + pos;
    if (file_.write) {
      char* data = scratch + (at % kAlign);
      memcpy(data, mem + pos, n);
      int e;
      {
        StageTimer t(job().Work().ioNs);
        e = WriteMaybeDirect(file_.fd, file_.directFd, data, at, n, &refused);
        if (refused) NoteDirectRefused(std::exchange(refused, 0));
      }
      if (e) return ErrorRecord::Os(e, "pwrite");
      *done += n;
      job().AddProgress(n);
    } else {
      char* data;
      uint64_t got;
      int e;
      {
        StageTimer t(job().Work().ioNs);
        e = ReadMaybeDirect(file_.fd, file_.directFd, scratch, at, n, &data, &got, &refused);
        if (refused) NoteDirectRefused(std::exchange(refused, 0));
      }
      if (e) return ErrorRecord::Os(e, "pread");
      memcpy(mem + pos, data, got);
      *done += got;
      job().AddProgress(got);
      if (got < n) {
        NoteEof(at + got);
        break;
      }
    }
    pos += n;
  }
  return {};
}

ErrorRecord StagedTransfer::ReadTask(uint64_t begin, uint64_t length, uint64_t* done, bool* leftInFlight) {
  int refused = 0;  // errno of an O_DIRECT refusal that buffered I/O covered
  DeviceState* d = PreparedDevice(spec_.device);
  int w = ThreadPool::WorkerIndex();
  WorkerSlot* slot = nullptr;
  if (ErrorRecord e = ReadySlot(d, w, &slot); !e.ok()) return e;
  if (spec_.device >= kMaxPipes)
    return ErrorRecord::Misuse("ERR_PENSTOCK_INVALID_DEVICE", "GPU ordinal past penstock's limit of 64");
  Pipe& pipe = WorkerPipe(spec_.device);
  if (pipe.slot != slot) {
    pipe.Flush();
    pipe.slot = slot;
  }
  WorkerSlot& s = *slot;
  const CudaApi& cu = Cuda();
  cu.CtxSetCurrent(d->ctx);
  // Pieces as planned, never past a half (whose slack holds the aligned span around a full
  // piece read through O_DIRECT): a copy starts as soon as its piece is read.
  uint64_t pieceMax = std::min<uint64_t>(spec_.stagePiece, s.half);
  ErrorRecord err;
  bool recorded = false;
  for (uint64_t pos = begin; pos < begin + length;) {
    if (job().Stopped()) break;
    uint64_t n = std::min(pieceMax, begin + length - pos);
    int h = pipe.sequence.NextHalf();
    char* buf = s.bounce + h * s.stride;
    {
      StageTimer t(job().Work().waitNs);
      err = pipe.Reuse(h);
    }
    if (!err.ok()) break;
    uint64_t filePos = file_.fileOffset + pos;
    char* data;
    uint64_t got;
    int e;
    if (spec_.stageScratch && file_.directFd < 0) {
      got = 0;
      err = ReadThroughScratch(buf, filePos, n, spec_.stageScratch, [&](uint64_t r) { got += r; });
      if (!err.ok()) break;
      data = buf;
      e = 0;
    } else {
      StageTimer t(job().Work().ioNs);
      e = ReadMaybeDirect(file_.fd, file_.directFd, buf, filePos, n, &data, &got, &refused);
      if (refused) NoteDirectRefused(std::exchange(refused, 0));
    }
    if (e) {
      err = ErrorRecord::Os(e, "pread");
      break;
    }
    if (got > 0) {
      err = PENSTOCK_CUDA(MemcpyHtoDAsync, spec_.dev + pos, data, got, s.stream);
      if (err.ok()) err = PENSTOCK_CUDA(EventRecord, s.events[h], s.stream);
      if (!err.ok()) break;
      pipe.sequence.Recorded(h);
      recorded = true;
      *done += got;
      job().AddProgress(got);
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
  pipe.sequence.Await(job().shared_from_this());
  *leftInFlight = true;
  return {};
}

ErrorRecord StagedTransfer::WriteTask(uint64_t begin, uint64_t length, uint64_t* done) {
  int refused = 0;  // errno of an O_DIRECT refusal that buffered I/O covered
  DeviceState* d = PreparedDevice(spec_.device);
  int w = ThreadPool::WorkerIndex();
  WorkerSlot* slot = nullptr;
  if (ErrorRecord e = ReadySlot(d, w, &slot); !e.ok()) return e;
  WorkerSlot& s = *slot;
  const CudaApi& cu = Cuda();
  cu.CtxSetCurrent(d->ctx);
  bool direct = file_.directFd >= 0;
  // Pieces as planned (never past a half): the copy off the GPU of one piece overlaps the pwrite
  // of the one before.
  uint64_t pieceMax = std::min<uint64_t>(spec_.stagePiece, s.half);
  uint64_t pieces = (length + pieceMax - 1) / pieceMax;
  auto place = [&](uint64_t k) {  // where piece k's bytes sit in the bounce buffer
    uint64_t filePos = file_.fileOffset + begin + k * pieceMax;
    return s.bounce + (k & 1) * s.stride + (direct ? filePos % kAlign : 0);
  };
  auto issue = [&](uint64_t k) -> ErrorRecord {
    uint64_t pos = begin + k * pieceMax;
    uint64_t n = std::min(pieceMax, begin + length - pos);
    ErrorRecord e = PENSTOCK_CUDA(MemcpyDtoHAsync, place(k), spec_.dev + pos, n, s.stream);
    if (e.ok()) e = PENSTOCK_CUDA(EventRecord, s.events[k & 1], s.stream);
    return e;
  };
  // As for host writes, when planned: a copy into cache-sized scratch, beside the other writers,
  // lets the kernel's copy under the inode lock read from this core's cache instead of from
  // wherever the GPU's copy left the bytes.
  bool useScratch = !direct && file_.writePiece;
  char* scratch = useScratch ? Scratch(pieceMax) : nullptr;
  if (useScratch && !scratch) return ErrorRecord::Os(ENOMEM, "posix_memalign");
  ErrorRecord err = issue(0);
  for (uint64_t k = 0; k < pieces && err.ok(); ++k) {
    if (job().Stopped()) break;
    // Overlap: the next piece comes off the GPU while this one goes to the file.
    if (k + 1 < pieces && !(err = issue(k + 1)).ok()) break;
    {
      StageTimer t(job().Work().waitNs);
      err = PENSTOCK_CUDA(EventSynchronize, s.events[k & 1]);
    }
    if (!err.ok()) break;
    uint64_t pos = begin + k * pieceMax;
    uint64_t n = std::min(pieceMax, begin + length - pos);
    const char* src = place(k);
    if (scratch) {
      memcpy(scratch, src, n);
      src = scratch;
    }
    int e;
    {
      StageTimer t(job().Work().ioNs);
      e = WriteMaybeDirect(file_.fd, file_.directFd, src, file_.fileOffset + pos, n, &refused);
      if (refused) NoteDirectRefused(std::exchange(refused, 0));
    }
    if (e) {
      err = ErrorRecord::Os(e, "pwrite");
      break;
    }
    *done += n;
    job().AddProgress(n);
  }
  // Nothing may still be copying into the bounce buffer when the next task takes it.
  ErrorRecord drained = PENSTOCK_CUDA(StreamSynchronize, s.stream);
  return err.ok() ? drained : err;
}

}  // namespace penstock
