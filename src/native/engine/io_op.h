// One user-visible operation (a transfer between a file and memory, or a buffer copy), split into
// tasks for the pool. Worker-side state only: its JS side (the promise, the JS values its tasks
// use, the progress callback) is held by the bindings (instance.h, js_settlement.h), which this
// class reaches only through OperationListener.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>

#include "sys/error_record.h"
#include "engine/issued_copy.h"
#include "engine/op_spec.h"
#include "engine/op_timeline.h"
#include "engine/pinned_use.h"
#include "engine/task_claims.h"
#include "engine/work_counters.h"

namespace penstock {

class Operation;
class MappedRunner;
struct GatherStage;

// Where an operation's progress and end go (instance.cc hands both to the JS thread).
class OperationListener {
 public:
  // Any thread. False when it cannot be delivered (the environment is going away).
  virtual bool Progressed(const std::shared_ptr<Operation>& op) = 0;
  // The last task is done and no runner counts anything into the operation any more.
  virtual void Drained(const std::shared_ptr<Operation>& op) = 0;

 protected:
  ~OperationListener() = default;
};

// One count of an operation's outstanding work that is not a task: the operation cannot drain
// (and so settle) while a hold is alive. Taken with Operation::Hold(), given back exactly once:
// by Release() or when it goes out of scope.
class DrainHold {
 public:
  DrainHold() = default;
  DrainHold(DrainHold&& o) noexcept = default;
  DrainHold& operator=(DrainHold&& o) noexcept {
    Release();
    op_ = std::move(o.op_);
    return *this;
  }
  DrainHold(const DrainHold&) = delete;
  DrainHold& operator=(const DrainHold&) = delete;
  ~DrainHold() { Release(); }
  void Release();

 private:
  friend class Operation;
  explicit DrainHold(std::shared_ptr<Operation> op) : op_(std::move(op)) {}
  std::shared_ptr<Operation> op_;
};

class Operation : public std::enable_shared_from_this<Operation> {
 public:
  // `pinned`: the pinned block the host memory lies in (if any), held until the last task is
  // done (not until the promise settles, which an exiting environment may never get to).
  Operation(OperationListener* listener, OpSpec spec, std::unique_ptr<PinnedUse> pinned);
  ~Operation();

  // Queues the runners on the pool. Main thread.
  void Start();
  void Cancel() { cancelled_ = true; }
  // Before Start(): the operation's one task is to wait for this copy (issued_copy.h).
  void SetIssued(std::unique_ptr<IssuedCopy> copy) { issued_ = std::move(copy); }
  // Its id among its environment's live operations (instance.h), given before Start().
  void SetId(uint64_t id) { id_ = id; }
  uint64_t Id() const { return id_; }

  // For the operation's runners: the pool's, the mapped runner, the staging pipeline.
  const OpSpec& spec() const { return spec_; }
  bool Stopped() const { return cancelled_ || failed_; }
  TaskClaims& claims() { return claims_; }
  // Runs task `index` on the calling worker, counted in the route's share.
  void RunTask(uint64_t index);
  // Counts one task as finished; the last one (with no hold left) drains the operation.
  void FinishTask();
  DrainHold Hold();
  void Fail(ErrorRecord e);
  void AddProgress(uint64_t n);

  // What it came to, for the main thread: read once the operation has drained, except
  // TakeProgress() (any time).
  bool Cancelled() const { return cancelled_; }
  bool Failed() const { return failed_; }
  ErrorRecord Error() const;
  // Bytes moved: the size, or less where the file ended.
  uint64_t BytesMoved() const;
  uint64_t Tasks() const { return tasks_; }
  uint32_t PeakTasks() const { return peakRunning_; }
  // The share its route carried (all of it but the mapped share's).
  const WorkCounters& RouteWork() const { return routeWork_; }
  // The mapped runner (staged reads that planned one), else null.
  const MappedRunner* Mapped() const { return mapped_.get(); }

  // Copies that carried a gathered read's stage to the GPU in order (0: the read was not
  // gathered; see OpSpec::gatherCopy).
  uint64_t OrderedCopies() const { return gatherCopies_.load(); }
  bool Gathered() const { return gathered_; }

  // Pieces that O_DIRECT refused and the buffered descriptor carried (0: none), and why.
  uint64_t DirectFallbacks() const { return directFallbacks_; }
  ErrorRecord DirectFallbackRecord() const;
  // Bytes done so far; clears the flag that keeps progress from being posted twice.
  uint64_t TakeProgress();
  const OpTimeline& Timeline() const { return timeline_; }

 private:
  void RunNext();
  void Drained();
  void NoteEof(uint64_t filePos);
  void NoteDirectRefused(int err);
  ErrorRecord HostTask(uint64_t begin, uint64_t length, uint64_t* done);
  // May leave its last copy in flight and set *leftInFlight: the task then finishes when that
  // copy is seen complete (the worker's next use of the half, or when it idles).
  ErrorRecord StagedReadTask(uint64_t begin, uint64_t length, uint64_t* done, bool* leftInFlight);
  ErrorRecord StagedWriteTask(uint64_t begin, uint64_t length, uint64_t* done);
  ErrorRecord CuFileTask(uint64_t begin, uint64_t length, uint64_t* done);
  // Reads `length` bytes at `filePos` into `dst` through cache-sized scratch, `piece` bytes at a
  // time, each streamed out with non-temporal stores (stream_copy.h) and then passed to
  // `arrived(bytes)`. Stops at the end of the file (noted) or once the operation is stopped.
  template <typename Arrived>
  ErrorRecord ReadThroughScratch(char* dst, uint64_t filePos, uint64_t length, uint64_t piece, Arrived arrived);
  ErrorRecord CopyTask(uint64_t begin, uint64_t length, uint64_t* done);
  // A read of kept pages (kept_pages.cc): the span checked or registered, then one copy.
  ErrorRecord KeptReadTask(uint64_t begin, uint64_t length, uint64_t* done);
  // The gathered read (gather_read.cc): takes the device's stage for this operation if it can,
  // reads one task into it, issues the copies of the finished prefix, and at the drain waits
  // for every copy and gives the stage back.
  void TakeGather();
  ErrorRecord GatheredReadTask(uint64_t index, uint64_t begin, uint64_t length, uint64_t* done);
  void FeedGather();
  void IssueGathered();
  void FinishGather();

  OperationListener* listener_;
  OpSpec spec_;
  std::unique_ptr<PinnedUse> pinned_;
  std::unique_ptr<MappedRunner> mapped_;
  std::unique_ptr<IssuedCopy> issued_;
  uint64_t id_ = 0;
  uint64_t tasks_ = 0;
  uint64_t taskBytes_ = 0;
  uint64_t runners_ = 0;  // pool runners Start queued (the mapped runner not counted)
  TaskClaims claims_;
  // Tasks not yet finished, plus holds.
  std::atomic<uint64_t> remaining_{0};
  WorkCounters routeWork_;
  std::atomic<uint32_t> running_{0};  // tasks of this operation running now, and the most at once
  std::atomic<uint32_t> peakRunning_{0};
  std::atomic<uint64_t> eofAt_{UINT64_MAX};
  std::atomic<uint64_t> directFallbacks_{0};
  std::atomic<int> directFallbackErrno_{0};
  std::atomic<uint64_t> bytesDone_{0};
  std::atomic<bool> progressPending_{false};
  OpTimeline timeline_;
  // The gathered read's state. The prefix and what of it was issued change only under feeding_.
  GatherStage* gather_ = nullptr;
  bool gathered_ = false;
  CUcontext gatherCtx_ = nullptr;
  std::unique_ptr<std::atomic<bool>[]> arrived_;
  std::atomic<uint64_t> arrivals_{0};
  std::atomic<bool> feeding_{false};
  uint64_t gatherReady_ = 0;
  uint64_t gatherIssued_ = 0;
  std::atomic<uint64_t> gatherCopies_{0};
  std::atomic<bool> cancelled_{false};
  std::atomic<bool> failed_{false};
  mutable std::mutex errorMutex_;
  ErrorRecord error_;
};

}  // namespace penstock
