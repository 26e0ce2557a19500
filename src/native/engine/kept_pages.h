// A file's page-cache pages kept registered with CUDA between reads (TypeScript decides which
// ranges, for how long and within what budget: kept-pages.ts). A read of a kept range is one
// copy by the GPU straight out of the page cache: no CPU copy, no registration on the way.
//
// The pages stay those of the file only while the file is not truncated, punched or rewritten
// under them, so each span keeps the file's stamp (inode, size, modification and change times)
// from when its pages were pinned, and every read of it compares the stamp first: a changed file
// is refused (ERR_PENSTOCK_KEPT_STALE), never read from pages that may no longer be its own.
#pragma once
#include <cstdint>
#include <memory>

#include "engine/issued_copy.h"
#include "sys/error_record.h"

namespace penstock {

// What fstat says of a file, as far as kept pages depend on it.
struct FileStamp {
  uint64_t dev = 0, ino = 0, size = 0;
  int64_t mtimeNs = 0, ctimeNs = 0;
  bool operator==(const FileStamp& o) const {
    return dev == o.dev && ino == o.ino && size == o.size && mtimeNs == o.mtimeNs && ctimeNs == o.ctimeNs;
  }
};
ErrorRecord StampOf(int fd, FileStamp* out);

// One range of a file mapped read-only and registered with CUDA (portable: any GPU may copy from
// it). Unregistered and unmapped when the last holder lets go: the registry, or a read in flight.
class KeptSpan {
 public:
  // Maps and registers the pages of [fileOffset, fileOffset + length) of `fd`. The CPU never
  // touches the mapping, so a truncation cannot raise SIGBUS here.
  static ErrorRecord Create(int fd, uint64_t fileOffset, uint64_t length, const FileStamp& stamp,
                            std::shared_ptr<KeptSpan>* out);
  ~KeptSpan();
  KeptSpan(const KeptSpan&) = delete;
  KeptSpan& operator=(const KeptSpan&) = delete;

  bool Covers(uint64_t fileOffset, uint64_t length) const {
    return fileOffset >= first_ && length <= end_ - first_ && fileOffset - first_ <= end_ - first_ - length;
  }
  // The registered address of file byte `fileOffset` (Covers() it).
  const char* At(uint64_t fileOffset) const { return static_cast<const char*>(map_) + (fileOffset - mapStart_); }
  uint64_t Bytes() const { return span_; }
  const FileStamp& Stamp() const { return stamp_; }

 private:
  KeptSpan() = default;
  void* map_ = nullptr;
  uint64_t mapStart_ = 0, span_ = 0;  // the page-aligned mapping
  uint64_t first_ = 0, end_ = 0;      // the file bytes it was kept for
  bool registered_ = false;
  FileStamp stamp_;
};

// The registry of spans by the id TypeScript gave each (any thread).
bool StoreKept(uint32_t id, std::shared_ptr<KeptSpan> span);
std::shared_ptr<KeptSpan> FindKept(uint32_t id);
// Drops the registry's hold; the pages go once no read in flight holds them. False: unknown id.
bool ReleaseKept(uint32_t id);
uint64_t KeptBytes();

// For a read of kept span `id` of `fd`: the span, once the file's stamp is checked against it.
ErrorRecord CheckedKept(uint32_t id, int fd, uint64_t fileOffset, uint64_t size, std::shared_ptr<KeptSpan>* out);
// For a read that keeps its range: refuses a file changed within `settleNs` of now (its times
// could then still change without changing the stamp), else maps and registers the range.
ErrorRecord KeepRange(uint32_t id, int fd, uint64_t fileOffset, uint64_t size, uint64_t settleNs,
                      std::shared_ptr<KeptSpan>* out);

// A read of kept span `id` on the calling thread, on the device's inline stream, waited for;
// `*busy` (and nothing read) when another thread holds that stream.
ErrorRecord ReadKeptNow(uint32_t id, int fd, uint64_t fileOffset, uint64_t size, int device, CUdeviceptr dst, bool* busy);
// Checks the span and queues its one copy into the GPU on the device's issue lane, now.
ErrorRecord IssueKeptCopy(uint32_t id, int fd, uint64_t fileOffset, uint64_t size, int device, CUdeviceptr dst,
                          std::unique_ptr<IssuedCopy>* out);

}  // namespace penstock
