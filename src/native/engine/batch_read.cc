// The tasks of a batched read. Host tasks pread straight into the target where the plan says
// the read is exactly one contiguous stretch of it, and otherwise through per-thread scratch.
// Device tasks gather their reads into the worker's pinned bounce halves one after another and
// copy each half to the GPU with as few copies as the targets allow: pieces next to each other
// both in staging and on the GPU go in one copy, so ranges ordered by target address (as the plan
// orders them) become one copy per half. Where they still need many (ranges apart on the GPU),
// the plan can have them issued in one batch call. While one half is copied, the next is filled.
#include "engine/batch_read.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "engine/copy_batch.h"
#include "engine/device.h"
#include "sys/posix_io.h"
#include "sys/read_ring.h"
#include "engine/staging_pipe.h"
#include "sys/thread_pool.h"
#include "engine/work_counters.h"

namespace penstock {

ErrorRecord BatchRead::Run(uint64_t index, uint64_t* done, bool* leftInFlight) {
  const Task& t = plan_.tasks[index];
  return t.device < 0 ? HostTask(t) : DeviceTask(t);
}

void BatchRead::ReadFailed(uint32_t r, int err) {
  std::lock_guard<std::mutex> lock(readErrorMutex_);
  readErrors_.push_back({r, ErrorRecord::Os(err, "pread")});
}

int64_t BatchRead::ReadInto(uint32_t r, char* buf) {
  const Read& rd = plan_.reads[r];
  int err = 0;
  ssize_t got;
  {
    uint64_t t0 = NowNs();
    got = PreadFull(rd.fd, buf, rd.length, rd.fileOffset, false, &err);
    job().Work().ioNs += NowNs() - t0;
  }
  ++preads_;
  if (got < 0) {
    ReadFailed(r, err);
    return -1;
  }
  return got;
}

void BatchRead::NoteRingError(int err) {
  int none = 0;
  ringError_.compare_exchange_strong(none, err);  // the first one is the one reported
}

void BatchRead::ReadGroup(uint32_t first, uint32_t count, char* const* bufs, int64_t* got) {
  for (uint32_t i = 0; i < count; ++i) got[i] = 0;
  int err = 0;
  ReadRing* ring = plan_.ringEntries && count > 1 ? ThreadRing(plan_.ringEntries, &err) : nullptr;
  if (err) NoteRingError(err);
  if (!ring) {
    for (uint32_t i = 0; i < count && !Stopped(); ++i) got[i] = ReadInto(first + i, bufs[i]);
    return;
  }
  // Kept by the worker across groups: a task reads group after group.
  thread_local std::vector<RingRead> reqs;
  reqs.resize(count);
  for (uint32_t i = 0; i < count; ++i) {
    const Read& rd = plan_.reads[first + i];
    reqs[i] = {rd.fd, bufs[i], rd.length, rd.fileOffset};
  }
  uint64_t t0 = NowNs();
  if (int e = ring->ReadAll(reqs.data(), count, got)) NoteRingError(e);
  job().Work().ioNs += NowNs() - t0;
  preads_ += count;
  ringReads_ += count;
  for (uint32_t i = 0; i < count; ++i) {
    if (got[i] >= 0) continue;
    ReadFailed(first + i, static_cast<int>(-got[i]));
    got[i] = -1;
  }
}

uint64_t BatchRead::Arrived(const Piece& p, int64_t got) const {
  if (got <= 0 || static_cast<uint64_t>(got) <= p.at) return 0;
  return std::min<uint64_t>(p.size, static_cast<uint64_t>(got) - p.at);
}

ErrorRecord BatchRead::HostTask(const Task& t) {
  const uint32_t end = t.firstRead + t.reads;
  std::vector<char*> bufs;
  std::vector<int64_t> got;
  for (uint32_t r = t.firstRead; r < end;) {
    if (Stopped()) break;
    // A group: reads straight into their targets, and through scratch as many as it holds (at
    // least one); one read at a time without a ring.
    uint32_t stop = r;
    uint64_t scratchBytes = 0;
    uint32_t most = plan_.ringEntries ? plan_.ringEntries : 1;
    while (stop < end && stop - r < most) {
      const Read& rd = plan_.reads[stop];
      if (rd.directTarget < 0) {
        if (stop > r && scratchBytes + rd.length > plan_.ringScratch) break;
        scratchBytes += rd.length;
      }
      ++stop;
    }
    char* scratch = nullptr;
    if (scratchBytes) {
      scratch = Scratch(scratchBytes);
      if (!scratch) return ErrorRecord::Os(ENOMEM, "posix_memalign");
    }
    bufs.resize(stop - r);
    uint64_t at = 0;
    for (uint32_t i = 0; i < bufs.size(); ++i) {
      const Read& rd = plan_.reads[r + i];
      if (rd.directTarget >= 0) {
        bufs[i] = plan_.hostBase[rd.directTarget] + rd.directOffset;
      } else {
        bufs[i] = scratch + at;
        at += rd.length;
      }
    }
    got.resize(bufs.size());
    ReadGroup(r, static_cast<uint32_t>(bufs.size()), bufs.data(), got.data());
    uint64_t moved = 0;
    for (uint32_t i = 0; i < bufs.size(); ++i) {
      const Read& rd = plan_.reads[r + i];
      for (uint32_t k = rd.firstPiece; k < rd.firstPiece + rd.pieces; ++k) {
        const Piece& p = plan_.pieces[k];
        uint64_t n = Arrived(p, got[i]);
        if (n && rd.directTarget < 0) memcpy(plan_.hostBase[p.target] + p.targetOffset, bufs[i] + p.at, n);
        plan_.pieceBytes[k] = static_cast<double>(n);
        moved += n;
      }
    }
    if (moved) job().AddProgress(moved);
    r = stop;
  }
  return {};
}

ErrorRecord BatchRead::DeviceTask(const Task& t) {
  int ordinal = t.device;
  DeviceState* d = PreparedDevice(ordinal);
  WorkerSlot* slot = nullptr;
  if (ErrorRecord e = ReadySlot(d, ThreadPool::WorkerIndex(), &slot); !e.ok()) return e;
  // The bounce halves are this task's until it returns: settle what the worker's staged reads
  // left in flight in them first, and leave nothing in flight after.
  FlushWorkerPipes();
  const CudaApi& cu = Cuda();
  cu.CtxSetCurrent(d->ctx);
  std::vector<HostToDevice> copies;
  CopyBatchArrays batchArrays;
  uint64_t halfBytes[2] = {0, 0};  // bytes landing on the GPU when each half's copies complete
  bool pending[2] = {false, false};
  ErrorRecord err;
  auto wait = [&](int half) -> ErrorRecord {
    if (!pending[half]) return {};
    uint64_t t0 = NowNs();
    CUresult r = cu.EventSynchronize(slot->events[half]);
    job().Work().waitNs += NowNs() - t0;
    pending[half] = false;
    if (r != CUDA_SUCCESS) return ErrorRecord::FromCuda(r, "cuEventSynchronize");
    if (halfBytes[half]) job().AddProgress(halfBytes[half]);
    halfBytes[half] = 0;
    return {};
  };
  auto flush = [&](int half) -> ErrorRecord {  // issues the half's copies
    bool unbatched = false;
    // In groups of at most copyBatchMax: one batch call each where it holds copyBatchMin or more.
    for (size_t at = 0; at < copies.size();) {
      size_t n = std::min<size_t>(copies.size() - at, plan_.copyBatchMax);
      bool crowded = plan_.copyBatchMin && n >= plan_.copyBatchMin;
      if (crowded && plan_.copyBatch) {
        ErrorRecord e = IssueCopyBatch(copies.data() + at, n, ordinal, batchArrays, slot->stream);
        if (!e.ok()) return e;
        copies_ += n;
        ++copyBatches_;
      } else {
        unbatched |= crowded;
        for (size_t i = at; i < at + n; ++i) {
          const HostToDevice& c = copies[i];
          CUresult r = cu.MemcpyHtoDAsync(c.dst, c.src, c.n, slot->stream);
          if (r != CUDA_SUCCESS) return ErrorRecord::FromCuda(r, "cuMemcpyHtoDAsync");
          ++copies_;
        }
      }
      at += n;
    }
    if (unbatched) ++unbatchedFills_;
    if (!copies.empty()) {
      CUresult r = cu.EventRecord(slot->events[half], slot->stream);
      if (r != CUDA_SUCCESS) return ErrorRecord::FromCuda(r, "cuEventRecord");
      pending[half] = true;
    }
    copies.clear();
    return {};
  };
  // The reads of one fill of a half, each at its place in it (plan order), read as one group.
  std::vector<char*> bufs;
  std::vector<int64_t> got;
  const uint32_t end = t.firstRead + t.reads;
  int h = 0;
  for (uint32_t r = t.firstRead; r < end && err.ok();) {
    if (Stopped()) break;
    if (!(err = wait(h)).ok()) break;  // this half's copies from two fills ago
    char* base = slot->bounce + h * slot->stride;
    // The plan checked that every read fits a half.
    uint32_t stop = r;
    uint64_t fill = 0;
    bufs.clear();
    while (stop < end && (stop == r || fill + plan_.reads[stop].length <= slot->half)) {
      bufs.push_back(base + fill);
      fill += plan_.reads[stop++].length;
    }
    got.resize(bufs.size());
    ReadGroup(r, static_cast<uint32_t>(bufs.size()), bufs.data(), got.data());
    // Pieces next to each other both in the half and on the GPU go in one copy.
    for (uint32_t i = 0; i < bufs.size(); ++i) {
      const Read& rd = plan_.reads[r + i];
      for (uint32_t k = rd.firstPiece; k < rd.firstPiece + rd.pieces; ++k) {
        const Piece& p = plan_.pieces[k];
        uint64_t n = Arrived(p, got[i]);
        plan_.pieceBytes[k] = static_cast<double>(n);
        if (!n) continue;
        const char* src = bufs[i] + p.at;
        CUdeviceptr dst = plan_.deviceBase[p.target - plan_.hostBase.size()] + p.targetOffset;
        HostToDevice* last = copies.empty() ? nullptr : &copies.back();
        if (last && last->src + last->n == src && last->dst + last->n == dst) last->n += n;
        else copies.push_back({src, dst, n});
        halfBytes[h] += n;
      }
    }
    err = flush(h);
    h ^= 1;
    r = stop;
  }
  // Nothing of this task may stay in flight: the halves go back to the worker's staged reads.
  ErrorRecord e0 = wait(0), e1 = wait(1);
  if (err.ok()) err = !e0.ok() ? e0 : e1;
  if (!err.ok()) cu.StreamSynchronize(slot->stream);
  return err;
}

}  // namespace penstock
