// The tasks of a transfer between a file and memory, one class per route, each with its own
// description: plain data parsed from JS on the main thread (js/file_specs.cc), every size
// planned in TypeScript (transfer-plan.ts); none has a value of its own here.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>

#include "engine/job.h"
#include "sys/cuda_api.h"
#include "sys/cufile_api.h"
#include "sys/error_record.h"

namespace penstock {

class MappedRunner;
struct GatherStage;

// What every route of a file transfer reads: the file's range and how it is cut.
struct FileRange {
  bool write = false;
  int fd = -1;
  int directFd = -1;  // a second descriptor opened with O_DIRECT, or -1
  uint64_t fileOffset = 0;
  uint64_t size = 0;
  uint64_t taskSize = 0;
  // At most this many tasks in flight (0: one per pool thread). Buffered writes into one file
  // serialise on its inode lock, so more writers than a few only wait.
  uint32_t maxRunners = 0;
  // Buffered writes through cache-sized scratch: host writes in pieces of this size, staged
  // writes piece by piece (0: straight from the source or the bounce buffer).
  uint64_t writePiece = 0;
};

// posix-host: pread/pwrite between the file and host memory.
struct HostSpec {
  FileRange file;
  char* host = nullptr;  // the target or source, already offset
  // Host reads through cache-sized scratch and streaming stores, in pieces of this size (0: read
  // straight into the target).
  uint64_t hostStagePiece = 0;
  // Reads and writes through O_DIRECT: bytes per piece of aligned scratch.
  uint64_t directPiece = 0;
};

// posix-device: through the workers' pinned bounce halves (device.h).
struct StagedSpec {
  FileRange file;
  CUdeviceptr dev = 0;  // the target or source, already offset
  int device = -1;
  // Bytes per copy through a bounce half (at most a half).
  uint64_t stagePiece = 0;
  // Reads: whether one worker also carries tasks from the range's end by registering the file's
  // page-cache pages with CUDA and copying straight out of them, in pieces of `mappedPiece`
  // bytes, each claim at most 1/`mappedClaimDivisor` of the tasks left (mapped_read.h).
  bool mapped = false;
  uint64_t mappedPiece = 0;
  uint64_t mappedClaimDivisor = 0;
  // Buffered reads: preads go into cache-sized scratch in pieces of this size and are streamed
  // into the bounce half with non-temporal stores, so the GPU's copy reads them from memory
  // rather than from lines still dirty in a CPU cache (0: pread into the half).
  uint64_t stageScratch = 0;
  // Buffered reads through scratch that fit the device's gather stage: each task streams its
  // bytes into the stage at its own offset, and the stage goes to the GPU in order, in copies of
  // at least this many bytes as the finished prefix grows (gather_read.cc). 0, or the stage
  // taken by another job: each task copies through its worker's bounce half.
  uint64_t gatherCopy = 0;
};

// cufile: cuFileRead/cuFileWrite straight between the file and GPU memory.
struct CuFileSpec {
  FileRange file;
  CUdeviceptr dev = 0;
  int device = -1;
  CUfileHandle_t handle = nullptr;
  CUdeviceptr base = 0;  // the base handed to cuFile, and the target's offset from it
  uint64_t baseOffset = 0;
};

// What the routes share: the cut into tasks, where the file ended, and O_DIRECT's refusals.
class FileTasks : public JobTasks {
 public:
  explicit FileTasks(const FileRange& file) : file_(file) {}
  uint64_t TaskCount() const override { return file_.size == 0 ? 0 : (file_.size + file_.taskSize - 1) / file_.taskSize; }
  uint32_t MaxRunners() const override { return file_.maxRunners; }

  // Bytes moved: the size, or less where the file ended.
  uint64_t BytesMoved() const;
  // Pieces that O_DIRECT refused and the buffered descriptor carried (0: none), and why.
  uint64_t DirectFallbacks() const { return directFallbacks_; }
  ErrorRecord DirectFallbackRecord() const;

 protected:
  uint64_t TaskBegin(uint64_t index) const { return index * file_.taskSize; }
  uint64_t TaskLength(uint64_t index) const { return std::min(file_.taskSize, file_.size - TaskBegin(index)); }
  void NoteEof(uint64_t filePos);
  void NoteDirectRefused(int err);
  // Reads `length` bytes at `filePos` into `dst` through cache-sized scratch, `piece` bytes at a
  // time, each streamed out with non-temporal stores (stream_copy.h) and then passed to
  // `arrived(bytes)`. Stops at the end of the file (noted) or once the job is stopped.
  template <typename Arrived>
  ErrorRecord ReadThroughScratch(char* dst, uint64_t filePos, uint64_t length, uint64_t piece, Arrived arrived);

  const FileRange file_;

 private:
  std::atomic<uint64_t> eofAt_{UINT64_MAX};
  std::atomic<uint64_t> directFallbacks_{0};
  std::atomic<int> directFallbackErrno_{0};
};

class HostTransfer final : public FileTasks {
 public:
  explicit HostTransfer(const HostSpec& spec) : FileTasks(spec.file), spec_(spec) {}
  ErrorRecord Run(uint64_t index, uint64_t* done, bool* leftInFlight) override;

 private:
  const HostSpec spec_;
};

class StagedTransfer final : public FileTasks {
 public:
  explicit StagedTransfer(const StagedSpec& spec);
  ~StagedTransfer() override;
  uint64_t Starting(uint64_t runners) override;
  ErrorRecord Run(uint64_t index, uint64_t* done, bool* leftInFlight) override;
  void Drained() override;

  // The mapped runner (reads that planned one), else null.
  const MappedRunner* Mapped() const { return mapped_.get(); }
  // Copies that carried a gathered read's stage to the GPU in order (see StagedSpec::gatherCopy).
  bool Gathered() const { return gathered_; }
  uint64_t OrderedCopies() const { return gatherCopies_.load(); }

 private:
  // May leave its last copy in flight and set *leftInFlight: the task then finishes when that
  // copy is seen complete (the worker's next use of the half, or when it idles).
  ErrorRecord ReadTask(uint64_t begin, uint64_t length, uint64_t* done, bool* leftInFlight);
  ErrorRecord WriteTask(uint64_t begin, uint64_t length, uint64_t* done);
  // The gathered read (gather_read.cc): takes the device's stage for this job if it can, reads
  // one task into it, issues the copies of the finished prefix, and at the drain waits for every
  // copy and gives the stage back.
  void TakeGather();
  ErrorRecord GatheredReadTask(uint64_t index, uint64_t begin, uint64_t length, uint64_t* done);
  void FeedGather();
  void IssueGathered();
  void FinishGather();

  const StagedSpec spec_;
  std::unique_ptr<MappedRunner> mapped_;
  // The gathered read's state. The prefix and what of it was issued change only under feeding_.
  GatherStage* gather_ = nullptr;
  bool gathered_ = false;
  CUcontext gatherCtx_ = nullptr;
  uint64_t tasks_ = 0;
  std::unique_ptr<std::atomic<bool>[]> arrived_;
  std::atomic<uint64_t> arrivals_{0};
  std::atomic<bool> feeding_{false};
  uint64_t gatherReady_ = 0;
  uint64_t gatherIssued_ = 0;
  std::atomic<uint64_t> gatherCopies_{0};
};

class CuFileTransfer final : public FileTasks {
 public:
  explicit CuFileTransfer(const CuFileSpec& spec) : FileTasks(spec.file), spec_(spec) {}
  ErrorRecord Run(uint64_t index, uint64_t* done, bool* leftInFlight) override;

 private:
  const CuFileSpec spec_;
};

}  // namespace penstock
