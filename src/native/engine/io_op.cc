// An operation's runners and bookkeeping: tasks claimed and run, finished, failed, counted.
#include "engine/io_op.h"

#include <algorithm>

#include "engine/mapped_read.h"
#include "engine/staging_pipe.h"
#include "sys/thread_pool.h"

namespace penstock {

void DrainHold::Release() {
  if (auto op = std::move(op_)) op->FinishTask();
}

Operation::Operation(OperationListener* listener, OpSpec spec, std::unique_ptr<PinnedUse> pinned)
    : listener_(listener), spec_(spec), pinned_(std::move(pinned)) {}

Operation::~Operation() = default;

DrainHold Operation::Hold() {
  // Only taken while the operation cannot drain: before its runners start, or by one of them.
  ++remaining_;
  return DrainHold(shared_from_this());
}

void Operation::FinishTask() {
  timeline_.TaskEnded();
  if (remaining_.fetch_sub(1) == 1) Drained();
}

void Operation::Drained() {
  if (gather_) FinishGather();
  timeline_.Drained();
  pinned_.reset();
  listener_->Drained(shared_from_this());
}

void Operation::Start() {
  timeline_.Started();
  auto self = shared_from_this();
  // A buffer copy is one task; Submit checked that a file transfer's (or a kept read's) tasks fit
  // TaskClaims.
  uint64_t task = spec_.kind == OpKind::File || spec_.kind == OpKind::KeptRead ? spec_.taskSize : std::max<uint64_t>(spec_.size, 1);
  uint64_t n = spec_.size == 0 ? 0 : (spec_.size + task - 1) / task;
  tasks_ = n;
  taskBytes_ = task;
  if (n == 0) {
    Drained();
    return;
  }
  claims_.Reset(n);
  remaining_ = n;
  if (spec_.gatherCopy && spec_.kind == OpKind::File && spec_.route == Route::PosixDevice && !spec_.write) TakeGather();

  // Runners, not tasks, go in the queue: each takes the operation's next task and then queues
  // itself again at the back. Concurrent operations (one per GPU, say) so share the workers
  // task by task instead of running one after another in submission order.
  ThreadPool& pool = ThreadPool::Instance();
  uint64_t runners = std::min<uint64_t>(n, std::max(1, pool.Size()));
  if (spec_.maxRunners) runners = std::min<uint64_t>(runners, spec_.maxRunners);
  if (spec_.mapped) {
    // Submit checked that a mapped share is a staged read with page-aligned tasks.
    mapped_ = std::make_unique<MappedRunner>(spec_);
    if (mapped_->Ready()) {
      // First in the queue: it holds its worker for the whole operation, and takes the place of
      // one staged runner.
      auto hold = std::make_shared<DrainHold>(Hold());
      pool.Submit([self, hold] { self->mapped_->Run(*self, std::move(*hold)); });
      --runners;
    }
  }
  runners_ = runners;
  for (uint64_t i = 0; i < runners; ++i) pool.Submit([self] { self->RunNext(); });
}

void Operation::RunNext() {
  Claim c = claims_.Front();
  if (!c.count) return;
  // Queue the next turn before working, so the queue never runs dry behind a long task, but only
  // while tasks remain beyond one for each runner already queued (a turn that finds nothing left
  // would cost a wake-up for nothing). An operation limited to a few tasks at once queues it
  // after instead: each runner is then one chain of tasks.
  bool more = c.first + runners_ < tasks_;
  auto next = [this] {
    auto self = shared_from_this();
    ThreadPool::Instance().Submit([self] { self->RunNext(); });
  };
  if (more && !spec_.maxRunners) next();
  RunTask(c.first);
  if (more && spec_.maxRunners) next();
}

void Operation::RunTask(uint64_t index) {
  uint64_t begin = index * taskBytes_;
  uint64_t length = std::min(taskBytes_, spec_.size - begin);
  uint64_t t0 = NowNs();
  timeline_.TaskBegan(t0);
  if (index < runners_) timeline_.RunnerBegan(t0);
  uint32_t running = ++running_;
  for (uint32_t peak = peakRunning_.load(); running > peak && !peakRunning_.compare_exchange_weak(peak, running);) {
  }
  bool leftInFlight = false;
  // A copy already issued is waited for even once the operation stopped: its bytes are moving.
  if (!Stopped() || issued_) {
    uint64_t done = 0;
    ErrorRecord e;
    // Only staged reads continue a worker's pipeline; anything else first settles it.
    bool stagedRead = spec_.kind == OpKind::File && spec_.route == Route::PosixDevice && !spec_.write;
    if (stagedRead) PollWorkerPipes();
    else FlushWorkerPipes();
    if (spec_.kind == OpKind::KeptRead) {
      e = KeptReadTask(begin, length, &done);
    } else if (spec_.kind != OpKind::File) {
      e = CopyTask(begin, length, &done);
    } else {
      switch (spec_.route) {
        case Route::PosixHost: e = HostTask(begin, length, &done); break;
        case Route::PosixDevice:
          if (spec_.write) e = StagedWriteTask(begin, length, &done);
          else if (gather_) e = GatheredReadTask(index, begin, length, &done);
          else e = StagedReadTask(begin, length, &done, &leftInFlight);
          break;
        case Route::CuFile: e = CuFileTask(begin, length, &done); break;
      }
    }
    if (!e.ok()) Fail(std::move(e));
    ++routeWork_.tasks;
    routeWork_.bytes += done;
  }
  routeWork_.busyNs += NowNs() - t0;
  --running_;
  if (!leftInFlight) FinishTask();
}

void Operation::Fail(ErrorRecord e) {
  std::lock_guard<std::mutex> lock(errorMutex_);
  if (failed_) return;
  error_ = std::move(e);
  failed_ = true;
}

ErrorRecord Operation::Error() const {
  std::lock_guard<std::mutex> lock(errorMutex_);
  return error_;
}

void Operation::NoteEof(uint64_t filePos) {
  uint64_t cur = eofAt_.load();
  while (filePos < cur && !eofAt_.compare_exchange_weak(cur, filePos)) {
  }
}

uint64_t Operation::BytesMoved() const {
  uint64_t eof = eofAt_.load();
  return eof == UINT64_MAX ? spec_.size : std::min<uint64_t>(spec_.size, eof - spec_.fileOffset);
}

void Operation::NoteDirectRefused(int err) {
  directFallbackErrno_ = err;
  ++directFallbacks_;
}

ErrorRecord Operation::DirectFallbackRecord() const {
  return ErrorRecord::Os(directFallbackErrno_.load(), spec_.write ? "pwrite" : "pread");
}

void Operation::AddProgress(uint64_t n) {
  bytesDone_ += n;
  if (spec_.wantProgress && !progressPending_.exchange(true))
    if (!listener_->Progressed(shared_from_this())) progressPending_ = false;
}

uint64_t Operation::TakeProgress() {
  progressPending_ = false;
  return bytesDone_.load();
}

}  // namespace penstock
