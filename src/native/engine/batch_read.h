// Batched reads: one job carrying many byte ranges of one or several files into host or
// device memory. TypeScript plans everything (which ranges share one pread, the order in staging,
// how reads are grouped into tasks); js/batch_bindings.cc checks the plan and starts it as a job
// (job.h), and the tasks here carry it out.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "sys/cuda_api.h"
#include "sys/error_record.h"
#include "engine/job.h"

namespace penstock {

struct Read {
  int fd = -1;
  uint64_t fileOffset = 0, length = 0;
  uint32_t firstPiece = 0, pieces = 0;
  int64_t directTarget = -1;  // host target the read lands in directly (its pieces are one stretch of it)
  uint64_t directOffset = 0;
};

struct Piece {
  uint64_t at = 0, size = 0;  // where in its read, how much
  uint32_t target = 0;        // < hostCount: host target; else device target (index - hostCount)
  uint64_t targetOffset = 0;
};

struct Task {
  uint32_t firstRead = 0, reads = 0;
  int device = -1;  // -1: host targets only
};

struct BatchPlan {
  // The plan, checked (plain data only: worker threads read it).
  std::vector<Read> reads;
  std::vector<Piece> pieces;
  std::vector<Task> tasks;
  std::vector<char*> hostBase;
  std::vector<uint64_t> hostLength;
  std::vector<CUdeviceptr> deviceBase;
  std::vector<uint64_t> deviceLength;
  std::vector<int> deviceOrdinal;
  double* pieceBytes = nullptr;  // per piece: bytes that arrived (written by tasks, read after they end)
  // Entries of each worker's io_uring ring, through which a task issues its reads many to one
  // system call; 0: a pread each.
  unsigned ringEntries = 0;
  // Host reads a ring group may hold through scratch, in bytes (reads straight into their
  // target need none).
  uint64_t ringScratch = 0;
  // A fill of a bounce half issues its copies in groups of at most copyBatchMax; a group of at
  // least copyBatchMin copies (0: never) goes in one batch call (copy_batch.h) where copyBatch is
  // set, and one call each where not (the fill is counted).
  uint32_t copyBatchMin = 0;
  uint32_t copyBatchMax = 1;
  bool copyBatch = false;
};

class BatchRead final : public JobTasks {
 public:
  explicit BatchRead(BatchPlan plan) : plan_(std::move(plan)) {}
  uint64_t TaskCount() const override { return plan_.tasks.size(); }
  ErrorRecord Run(uint64_t index, uint64_t* done, bool* leftInFlight) override;

  // What it came to, for the main thread: read once the job has drained (its busy, I/O and
  // wait times are the job's Work()).
  uint64_t Preads() const { return preads_; }
  uint64_t Copies() const { return copies_; }
  // Batch calls that carried some of those copies, and fills that needed copyBatchMin copies or
  // more but issued them one call each (no copyBatch).
  uint64_t CopyBatches() const { return copyBatches_; }
  uint64_t UnbatchedFills() const { return unbatchedFills_; }
  // Reads issued through io_uring, and the first errno that sent reads to pread instead (0: none).
  uint64_t RingReads() const { return ringReads_; }
  int RingError() const { return ringError_; }
  // Reads that failed, by index, each with its error.
  const std::vector<std::pair<uint32_t, ErrorRecord>>& ReadErrors() const { return readErrors_; }

 private:
  bool Stopped() const { return job().Stopped(); }
  void ReadFailed(uint32_t r, int err);
  // One pread of read `r` into `buf`: the bytes that arrived (short only at end of file), or
  // -1 with the error noted against the read.
  int64_t ReadInto(uint32_t r, char* buf);
  // Reads `count` reads from `first` into bufs[i], through the worker's ring where the plan asks
  // for one and it can be had, else a pread each: got[i] as ReadInto returns it. Stops early on
  // cancel (the reads left get 0).
  void ReadGroup(uint32_t first, uint32_t count, char* const* bufs, int64_t* got);
  // Why the ring could not be had or failed (errno), if no reason was noted before.
  void NoteRingError(int err);
  // The bytes of piece `p` among `got` bytes of its read.
  uint64_t Arrived(const Piece& p, int64_t got) const;
  ErrorRecord HostTask(const Task& t);
  ErrorRecord DeviceTask(const Task& t);

  const BatchPlan plan_;
  std::atomic<uint64_t> preads_{0}, copies_{0}, ringReads_{0};
  std::atomic<uint64_t> copyBatches_{0}, unbatchedFills_{0};
  std::atomic<int> ringError_{0};
  std::mutex readErrorMutex_;
  std::vector<std::pair<uint32_t, ErrorRecord>> readErrors_;
};

}  // namespace penstock
