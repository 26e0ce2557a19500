// One user-visible operation (a read or write of a byte range, or a buffer copy), split into
// tasks for the pool. Tasks share this plain state; only the main thread touches JS values.
#pragma once
#include <napi.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>

#include "cufile_api.h"
#include "cuda_api.h"
#include "errors.h"
#include "host_memory.h"

namespace penstock {

enum class Route { PosixHost, PosixDevice, CuFile, CopyToDevice, CopyToHost };

// The "baton": everything a task needs, parsed from JS on the main thread.
struct OpSpec {
  bool write = false;
  Route route = Route::PosixHost;
  int fd = -1;
  int directFd = -1;
  uint64_t fileOffset = 0;
  uint64_t size = 0;
  uint64_t taskSize = 0;
  char* host = nullptr;  // host target or source, already offset
  CUdeviceptr dev = 0;   // device target or source, already offset
  int device = -1;
  CUfileHandle_t cufile = nullptr;
  CUdeviceptr cufileBase = 0;
  uint64_t cufileBaseOffset = 0;
  bool wantProgress = false;
  // Every size below is planned in TypeScript (transfer-plan.ts); none has a value of its own here.
  // Host reads through cache-sized scratch and streaming stores, in pieces of this size (0: read
  // straight into the target).
  uint64_t hostStagePiece = 0;
  // Host reads and writes through O_DIRECT: bytes per piece of aligned scratch.
  uint64_t directPiece = 0;
  // Staged device reads and writes: bytes per copy through a bounce half (at most a half).
  uint64_t stagePiece = 0;
  // Buffered writes through cache-sized scratch: host writes in pieces of this size, staged
  // writes piece by piece (0: straight from the source or the bounce buffer).
  uint64_t writePiece = 0;
  // At most this many tasks in flight (0: one per pool thread). Buffered writes into one file
  // serialise on its inode lock, so more writers than a few only wait.
  uint32_t maxRunners = 0;
  // Staged device reads: workers that also carry tasks from the range's end by registering the
  // file's page-cache pages with CUDA and copying straight out of them (0: none), in pieces of
  // `mappedPiece` bytes. Both ends are claimed until they meet, so the split follows the speeds.
  uint32_t mappedRunners = 0;
  uint64_t mappedPiece = 0;
};

class Instance;

// Adds the time until the end of its scope to a counter (per-stage timing of tasks).
class StageTimer {
 public:
  explicit StageTimer(std::atomic<uint64_t>& sink) : sink_(sink), t0_(Now()) {}
  ~StageTimer() { sink_ += Now() - t0_; }
  StageTimer(const StageTimer&) = delete;
  StageTimer& operator=(const StageTimer&) = delete;
  static uint64_t Now() {
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                     std::chrono::steady_clock::now().time_since_epoch())
                                     .count());
  }

 private:
  std::atomic<uint64_t>& sink_;
  uint64_t t0_;
};

class Operation : public std::enable_shared_from_this<Operation> {
 public:
  Operation(Instance* instance, OpSpec spec) : instance_(instance), spec_(spec) {}
  ~Operation();

  // Queues all tasks on the pool. Main thread.
  void Start();
  void Cancel() { cancelled_ = true; }
  // Environment teardown: forget JS handles without touching the dying environment.
  void Abandon();
  bool Cancelled() const { return cancelled_; }

  // Main thread: settle the Promise, or deliver progress.
  void Settle(Napi::Env env);
  void DeliverProgress(Napi::Env env);

  const OpSpec& spec() const { return spec_; }

  // Counts one task as finished; the last one hands the operation back to the JS thread.
  void FinishTask();
  // Whether a read that fell back to buffered I/O because O_DIRECT was refused (EINVAL).
  void NoteDirectRefused(int err);
  void Fail(ErrorRecord e);
  // Finishes a worker's staged reads whose copies are still in flight (pool idle hook).
  static void FlushDeferred();
  Napi::Promise::Deferred* deferred = nullptr;
  Napi::ObjectReference keepAlive;  // the JS memory the tasks use
  // Pinned memory the tasks use, held until the last task is done (not until the Promise
  // settles on the JS thread, which an exiting environment may never get to).
  std::unique_ptr<PinnedUse> pinned;
  Napi::FunctionReference progress;

 private:
  void RunNext();
  void RunTask(uint64_t begin, uint64_t length);
  // Tasks are claimed from both ends of the range: staged runners take the next from the front,
  // mapped runners up to `count` at a time from the back. Returns the first index and sets *got (0 when
  // nothing is left).
  uint64_t ClaimFront(uint64_t* got);
  uint64_t ClaimBack(uint64_t count, uint64_t* got);
  // Runs on one worker for the whole operation (mapped_read.cc).
  void RunMapped();
  ErrorRecord MapRange();
  ErrorRecord HostTask(uint64_t begin, uint64_t length, uint64_t* done);
  // May leave its last copy in flight and return *deferred = true: the task then finishes when
  // that copy is known complete (the worker's next use of the buffer half, or when it idles).
  ErrorRecord StagedReadTask(uint64_t begin, uint64_t length, uint64_t* done, bool* deferred);
  ErrorRecord StagedWriteTask(uint64_t begin, uint64_t length, uint64_t* done);
  ErrorRecord CuFileTask(uint64_t begin, uint64_t length, uint64_t* done);
  ErrorRecord CopyTask(uint64_t begin, uint64_t length);
  void NoteEof(uint64_t filePos);
  void AddProgress(uint64_t n);

  Instance* instance_;
  OpSpec spec_;
  std::atomic<uint64_t> remaining_{0};
  std::atomic<uint64_t> tasks_{0};
  // Low 32 bits: the next unclaimed task from the front; high 32: one past the last from the back.
  std::atomic<uint64_t> cursors_{0};
  uint64_t taskBytes_ = 0;
  std::atomic<uint64_t> bytesDone_{0};
  std::atomic<uint64_t> busyNs_{0};
  // Where the busy time went: inside read/write system calls, and waiting for GPU copies.
  std::atomic<uint64_t> ioNs_{0};
  std::atomic<uint64_t> waitNs_{0};
  std::atomic<uint32_t> running_{0};  // tasks of this operation running now, and the most at once
  std::atomic<uint32_t> peakRunning_{0};
  // The mapped runners' share, counted apart so each route's time stays its own.
  std::atomic<uint64_t> mappedTasks_{0};
  std::atomic<uint64_t> mappedBytes_{0};
  std::atomic<uint64_t> mappedBusyNs_{0};
  std::atomic<uint64_t> mappedIoNs_{0};
  std::atomic<uint64_t> mappedWaitNs_{0};
  ErrorRecord mappedError_;  // why mapped runners stopped early (guarded by errorMutex_)
  bool mappedFailed_ = false;
  void* map_ = nullptr;  // the range's page-cache mapping, for mapped runners
  uint64_t mapSpan_ = 0;
  uint64_t mapDelta_ = 0;  // fileOffset's distance from the page-aligned start of the mapping
  std::atomic<uint64_t> eofAt_{UINT64_MAX};
  // Pieces moved through the buffered descriptor because O_DIRECT refused them (errno, 0: none).
  std::atomic<uint64_t> directFallbacks_{0};
  std::atomic<int> directFallbackErrno_{0};
  void Drained();
  std::atomic<bool> cancelled_{false};
  std::atomic<bool> failed_{false};
  std::atomic<bool> progressPending_{false};
  std::atomic<uint64_t> lastProgress_{0};
  std::mutex errorMutex_;
  ErrorRecord error_;
};

}  // namespace penstock
