#include "engine/kept_pages.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>

#include <cerrno>
#include <map>
#include <mutex>

#include "engine/device.h"
#include "sys/direct_span.h"
#include "sys/thread_pool.h"

namespace penstock {

namespace {

// Never destroyed: read from any environment, and from workers, until the process is gone.
std::mutex& g_keptMutex = *new std::mutex();
std::map<uint32_t, std::shared_ptr<KeptSpan>>& g_kept = *new std::map<uint32_t, std::shared_ptr<KeptSpan>>();
uint64_t g_keptBytes = 0;

int64_t Ns(const struct timespec& t) { return static_cast<int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec; }

int64_t RealtimeNs() {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return Ns(t);
}

}  // namespace

ErrorRecord StampOf(int fd, FileStamp* out) {
  struct stat st;
  if (fstat(fd, &st) != 0) return ErrorRecord::Os(errno, "fstat");
  out->dev = st.st_dev;
  out->ino = st.st_ino;
  out->size = static_cast<uint64_t>(st.st_size);
  out->mtimeNs = Ns(st.st_mtim);
  out->ctimeNs = Ns(st.st_ctim);
  return {};
}

ErrorRecord KeptSpan::Create(int fd, uint64_t fileOffset, uint64_t length, const FileStamp& stamp,
                             std::shared_ptr<KeptSpan>* out) {
  const CudaApi& cu = Cuda();
  if (!cu.MemHostRegister || !cu.MemHostUnregister)
    return ErrorRecord::Misuse("ERR_PENSTOCK_MAPPED_UNAVAILABLE", "this CUDA driver has no cuMemHostRegister");
  std::shared_ptr<KeptSpan> s(new KeptSpan());
  s->first_ = fileOffset;
  s->end_ = fileOffset + length;
  s->mapStart_ = AlignDown(fileOffset);
  s->span_ = AlignUp(fileOffset + length) - s->mapStart_;
  s->stamp_ = stamp;
  void* m = mmap(nullptr, s->span_, PROT_READ, MAP_SHARED, fd, static_cast<off_t>(s->mapStart_));
  if (m == MAP_FAILED) return ErrorRecord::Os(errno, "mmap");
  s->map_ = m;
  // Portable: a copy into any GPU may read it, whichever context registered it.
  ErrorRecord e = PENSTOCK_CUDA(MemHostRegister, m, s->span_, CU_MEMHOSTREGISTER_READ_ONLY | CU_MEMHOSTREGISTER_PORTABLE);
  if (!e.ok()) return e;  // s unmaps as it goes
  s->registered_ = true;
  *out = std::move(s);
  return {};
}

KeptSpan::~KeptSpan() {
  if (registered_) Cuda().MemHostUnregister(map_);
  if (map_) munmap(map_, span_);
}

bool StoreKept(uint32_t id, std::shared_ptr<KeptSpan> span) {
  std::lock_guard<std::mutex> lock(g_keptMutex);
  uint64_t bytes = span->Bytes();
  if (!g_kept.emplace(id, std::move(span)).second) return false;
  g_keptBytes += bytes;
  return true;
}

std::shared_ptr<KeptSpan> FindKept(uint32_t id) {
  std::lock_guard<std::mutex> lock(g_keptMutex);
  auto it = g_kept.find(id);
  return it == g_kept.end() ? nullptr : it->second;
}

bool ReleaseKept(uint32_t id) {
  std::shared_ptr<KeptSpan> gone;  // unregistered outside the lock
  std::lock_guard<std::mutex> lock(g_keptMutex);
  auto it = g_kept.find(id);
  if (it == g_kept.end()) return false;
  gone = std::move(it->second);
  g_keptBytes -= gone->Bytes();
  g_kept.erase(it);
  return true;
}

uint64_t KeptBytes() {
  std::lock_guard<std::mutex> lock(g_keptMutex);
  return g_keptBytes;
}

ErrorRecord CheckedKept(uint32_t id, int fd, uint64_t fileOffset, uint64_t size, std::shared_ptr<KeptSpan>* out) {
  std::shared_ptr<KeptSpan> span = FindKept(id);
  if (!span) return ErrorRecord::Misuse("ERR_PENSTOCK_INTERNAL", "unknown kept span");
  if (!span->Covers(fileOffset, size)) return ErrorRecord::Misuse("ERR_PENSTOCK_INTERNAL", "the read is outside its kept span");
  FileStamp now;
  ErrorRecord e = StampOf(fd, &now);
  if (!e.ok()) return e;
  if (!(now == span->Stamp()))
    return ErrorRecord::Misuse("ERR_PENSTOCK_KEPT_STALE", "the file changed since its pages were registered");
  *out = std::move(span);
  return {};
}

ErrorRecord KeepRange(uint32_t id, int fd, uint64_t fileOffset, uint64_t size, uint64_t settleNs,
                      std::shared_ptr<KeptSpan>* out) {
  FileStamp now;
  ErrorRecord e = StampOf(fd, &now);
  if (!e.ok()) return e;
  // A change within the clock's coarse tick of the stamp could leave the times as they are.
  int64_t settled = RealtimeNs() - static_cast<int64_t>(settleNs);
  if (now.mtimeNs >= settled || now.ctimeNs >= settled)
    return ErrorRecord::Misuse("ERR_PENSTOCK_KEPT_RECENT", "the file changed too recently for its pages to be kept");
  if (fileOffset > now.size || size > now.size - fileOffset)
    return ErrorRecord::Misuse("ERR_PENSTOCK_KEPT_PAST_END", "the file no longer holds the whole range");
  std::shared_ptr<KeptSpan> span;
  e = KeptSpan::Create(fd, fileOffset, size, now, &span);
  if (!e.ok()) return e;
  if (!StoreKept(id, span)) return ErrorRecord::Misuse("ERR_PENSTOCK_INTERNAL", "kept span id in use");
  *out = std::move(span);
  return {};
}

ErrorRecord ReadKeptNow(uint32_t id, int fd, uint64_t fileOffset, uint64_t size, int device, CUdeviceptr dst, bool* busy) {
  *busy = false;
  DeviceState* d = PreparedDevice(device);
  if (!d) return ErrorRecord::Misuse("ERR_PENSTOCK_INTERNAL", "device not prepared");
  InlineStaging& in = d->inlineStaging;
  std::unique_lock<std::mutex> use(in.mutex, std::try_to_lock);
  if (!use.owns_lock()) {
    *busy = true;
    return {};
  }
  std::shared_ptr<KeptSpan> span;
  ErrorRecord e = CheckedKept(id, fd, fileOffset, size, &span);
  if (!e.ok()) return e;
  ContextGuard guard(d->ctx);
  e = PENSTOCK_CUDA(MemcpyHtoDAsync, dst, span->At(fileOffset), size, in.stream);
  ErrorRecord waited = PENSTOCK_CUDA(StreamSynchronize, in.stream);
  return e.ok() ? waited : e;
}

ErrorRecord IssueKeptCopy(uint32_t id, int fd, uint64_t fileOffset, uint64_t size, int device, CUdeviceptr dst,
                          std::unique_ptr<IssuedCopy>* out) {
  DeviceState* d = PreparedDevice(device);
  if (!d) return ErrorRecord::Misuse("ERR_PENSTOCK_INTERNAL", "device not prepared");
  std::shared_ptr<KeptSpan> span;
  ErrorRecord e = CheckedKept(id, fd, fileOffset, size, &span);
  if (!e.ok()) return e;
  ContextGuard guard(d->ctx);
  const char* src = span->At(fileOffset);
  return IssuedCopy::Issue(d, dst, src, size, std::move(span), out);
}

}  // namespace penstock
