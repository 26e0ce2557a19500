// A small read done on the calling thread when the page cache holds it: one preadv2 with
// RWF_NOWAIT, which never waits for the disk (it fails with EAGAIN instead), and for a GPU target
// copies from the device's inline staging. TypeScript decides when to try it and falls back to
// the pool when it does not move every byte.
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <climits>
#include <memory>

#include "engine/device.h"
#include "engine/inline_read.h"
#include "sys/stream_copy.h"
#include "sys/thread_pool.h"

namespace penstock {

ssize_t PreadNoWait(int fd, char* data, uint64_t size, uint64_t fileOffset) {
  struct iovec iov = {data, static_cast<size_t>(size)};
  ssize_t r;
  do {
    r = preadv2(fd, &iov, 1, static_cast<off_t>(fileOffset), RWF_NOWAIT);
  } while (r < 0 && errno == EINTR);
  return r < 0 ? -errno : r;
}

namespace {

inline void Pause() {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#endif
}

// The pieces of one read into the inline staging, claimed in order by the calling thread and by
// the pool workers that help it. Shared by ownership: a helper that reaches it after the read is
// over finds every piece claimed and touches nothing else (not the staging, not the file).
struct PieceBoard {
  static constexpr int64_t kPending = INT64_MIN;
  static constexpr int64_t kSkipped = INT64_MIN + 1;

  PieceBoard(int fd, char* buffer, uint64_t size, uint64_t fileOffset, uint64_t piece, char* scratch)
      : fd(fd), buffer(buffer), size(size), fileOffset(fileOffset), piece(piece), scratch(scratch),
        pieces(static_cast<uint32_t>((size + piece - 1) / piece)), got(new std::atomic<int64_t>[pieces]) {
    for (uint32_t i = 0; i < pieces; ++i) got[i].store(kPending, std::memory_order_relaxed);
  }

  uint64_t Length(uint32_t i) const { return std::min(piece, size - i * piece); }

  // Claims and reads one piece; false once every piece is claimed. After a short piece the rest
  // are skipped, not read: the pool will read the whole range again anyway.
  // `reader`: 0 for the calling thread, 1 + i for the i-th helper (its slot of the scratch).
  bool ReadOne(int reader) {
    uint32_t i = next.fetch_add(1, std::memory_order_relaxed);
    if (i >= pieces) return false;
    int64_t r = kSkipped;
    if (!stop.load(std::memory_order_relaxed)) {
      if (reader > 0) helped.fetch_add(1, std::memory_order_relaxed);
      r = ReadPiece(buffer + i * piece, Length(i), fileOffset + i * piece, reader);
      if (r < 0) {
        int none = 0;
        firstError.compare_exchange_strong(none, static_cast<int>(-r), std::memory_order_relaxed);
      }
      if (r != static_cast<int64_t>(Length(i))) stop.store(true, std::memory_order_relaxed);
    }
    got[i].store(r, std::memory_order_release);
    return true;
  }

  // Through scratch, the piece is read into the reader's slot of cache-sized scratch and
  // streamed into the staging with non-temporal stores: the GPU's copy then reads it from
  // memory, not from cache lines the pread left dirty, which it reads far slower.
  int64_t ReadPiece(char* to, uint64_t n, uint64_t at, int reader) const {
    if (!scratch) return PreadNoWait(fd, to, n, at);
    char* own = scratch + static_cast<uint64_t>(reader) * piece;
    int64_t r = PreadNoWait(fd, own, n, at);
    if (r > 0) StreamCopy(to, own, static_cast<size_t>(r));
    return r;
  }

  const int fd;
  char* const buffer;
  const uint64_t size, fileOffset, piece;
  char* const scratch;  // a slot of `piece` bytes per reader, or null: straight into the staging
  const uint32_t pieces;
  std::unique_ptr<std::atomic<int64_t>[]> got;  // per piece: bytes, -errno, kPending or kSkipped
  std::atomic<uint32_t> next{0};
  std::atomic<bool> stop{false};
  std::atomic<int> firstError{0};   // the errno of the first piece that failed, 0 while none has
  std::atomic<uint32_t> helped{0};  // pieces read by helpers
};

}  // namespace

ErrorRecord ReadCachedToDevice(const CachedDeviceRead& r, int64_t* result, uint32_t* helped) {
  *result = 0;
  *helped = 0;
  if (r.piece == 0) return ErrorRecord::Misuse("ERR_PENSTOCK_INVALID_ARGUMENT", "piece must be positive");
  DeviceState* d = PreparedDevice(r.device);
  if (!d) return ErrorRecord::Misuse("ERR_PENSTOCK_INTERNAL", "device not prepared");
  InlineStaging& in = d->inlineStaging;
  std::unique_lock<std::mutex> use(in.mutex, std::try_to_lock);
  if (!use.owns_lock()) {
    *result = -EBUSY;
    return {};
  }
  const uint64_t size = r.size, piece = r.piece;
  if (size == 0 || size > in.bytes)
    return ErrorRecord::Misuse("ERR_PENSTOCK_INVALID_ARGUMENT", "size must be between 1 and the device's inline staging");
  uint64_t pieces = (size + piece - 1) / piece;
  if (pieces > kMaxCachedPieces)
    return ErrorRecord::Misuse("ERR_PENSTOCK_INVALID_ARGUMENT", "piece is too small for size (at most 1024 pieces)");
  // Never more helpers than pieces to share, so the scratch is at most one piece per piece.
  int helpers = static_cast<int>(std::min<uint64_t>(r.helpers, pieces - 1));
  uint64_t scratchBytes = r.throughScratch ? (helpers + 1) * piece : 0;
  if (in.scratchBytes < scratchBytes) {
    free(in.scratch);
    in.scratch = nullptr;
    in.scratchBytes = 0;
    if (posix_memalign(reinterpret_cast<void**>(&in.scratch), 4096, scratchBytes) != 0) {
      *result = -ENOMEM;
      return {};
    }
    in.scratchBytes = scratchBytes;
  }
  ContextGuard guard(d->ctx);
  const CUdeviceptr dst = r.dst;
  auto board = std::make_shared<PieceBoard>(r.fd, in.buffer, size, r.fileOffset, piece, r.throughScratch ? in.scratch : nullptr);
  for (int h = 1; h <= helpers; ++h)
    ThreadPool::Instance().Submit([board, h] { while (board->ReadOne(h)) {} });
  // Copies go out in piece order, each covering the whole pieces finished since the last one.
  uint32_t copied = 0;
  bool stopped = false, issued = false;
  ErrorRecord e;
  auto issueReady = [&](bool wait) {
    uint32_t from = copied;
    while (copied < board->pieces && !stopped) {
      int64_t got = board->got[copied].load(std::memory_order_acquire);
      if (got == PieceBoard::kPending) {
        if (!wait) break;
        Pause();  // a helper is reading it: one pread from the page cache
        continue;
      }
      if (got == static_cast<int64_t>(board->Length(copied))) ++copied;
      else stopped = true;
    }
    if (copied > from && e.ok()) {
      uint64_t at = from * piece, end = std::min(size, copied * piece);
      e = PENSTOCK_CUDA(MemcpyHtoDAsync, dst + at, in.buffer + at, static_cast<size_t>(end - at), in.stream);
      issued = issued || e.ok();
      if (!e.ok()) board->stop.store(true, std::memory_order_relaxed);  // no more reading for nothing
    }
  };
  while (board->ReadOne(0)) issueReady(false);
  issueReady(true);
  // Every piece is claimed: wait for the ones helpers still hold (they write into the staging).
  for (uint32_t i = copied; i < board->pieces; ++i)
    while (board->got[i].load(std::memory_order_acquire) == PieceBoard::kPending) Pause();
  if (issued) {
    ErrorRecord waited = PENSTOCK_CUDA(StreamSynchronize, in.stream);
    if (e.ok()) e = waited;
  }
  *helped = board->helped.load(std::memory_order_relaxed);
  if (!e.ok()) return e;
  // An error of any piece wins (TypeScript tells "not supported" from "not cached" by it); else
  // the bytes of the first pieces that arrived whole, and of the one that came short.
  int firstError = board->firstError.load(std::memory_order_relaxed);
  if (firstError) {
    *result = -firstError;
    return {};
  }
  int64_t got = std::min(size, copied * piece);
  if (copied < board->pieces) got += std::max<int64_t>(0, board->got[copied].load(std::memory_order_acquire));
  *result = got;
  return {};
}

}  // namespace penstock
