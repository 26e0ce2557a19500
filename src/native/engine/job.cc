// A job's runners and bookkeeping: tasks claimed and run, finished, failed, counted.
#include "engine/job.h"

#include <algorithm>

#include "sys/thread_pool.h"

namespace penstock {

void DrainHold::Release() {
  if (auto job = std::move(job_)) job->FinishTask();
}

Job::Job(JobListener* listener, std::unique_ptr<JobTasks> tasks, bool wantProgress, std::unique_ptr<PinnedUse> pinned)
    : listener_(listener), tasks_(std::move(tasks)), wantProgress_(wantProgress), pinned_(std::move(pinned)) {
  tasks_->job_ = this;
}

Job::~Job() = default;

DrainHold Job::Hold() {
  // Only taken while the job cannot drain: before its runners start, or by one of them.
  ++remaining_;
  return DrainHold(shared_from_this());
}

void Job::FinishTask() {
  timeline_.TaskEnded();
  if (remaining_.fetch_sub(1) == 1) Drained();
}

void Job::Drained() {
  tasks_->Drained();
  timeline_.Drained();
  pinned_.reset();
  listener_->Drained(shared_from_this());
}

void Job::Start() {
  timeline_.Started();
  uint64_t n = tasks_->TaskCount();
  taskCount_ = n;
  maxRunners_ = tasks_->MaxRunners();
  if (n == 0) {
    Drained();
    return;
  }
  claims_.Reset(n);
  remaining_ = n;
  // Runners, not tasks, go in the queue: each takes the job's next task and then queues itself
  // again at the back. Concurrent jobs (one per GPU, say) so share the workers task by task
  // instead of running one after another in submission order.
  ThreadPool& pool = ThreadPool::Instance();
  uint64_t runners = std::min<uint64_t>(n, std::max(1, pool.Size()));
  if (maxRunners_) runners = std::min<uint64_t>(runners, maxRunners_);
  runners -= std::min(runners, tasks_->Starting(runners));
  runners_ = runners;
  auto self = shared_from_this();
  for (uint64_t i = 0; i < runners; ++i) pool.Submit([self] { self->RunNext(); });
}

void Job::RunNext() {
  Claim c = claims_.Front();
  if (!c.count) return;
  // Queue the next turn before working, so the queue never runs dry behind a long task, but only
  // while tasks remain beyond one for each runner already queued (a turn that finds nothing left
  // would cost a wake-up for nothing). A job limited to a few tasks at once queues it after
  // instead: each runner is then one chain of tasks.
  bool more = c.first + runners_ < taskCount_;
  auto next = [this] {
    auto self = shared_from_this();
    ThreadPool::Instance().Submit([self] { self->RunNext(); });
  };
  if (more && !maxRunners_) next();
  RunTask(c.first);
  if (more && maxRunners_) next();
}

void Job::RunTask(uint64_t index) {
  uint64_t t0 = NowNs();
  timeline_.TaskBegan(t0);
  if (index < runners_) timeline_.RunnerBegan(t0);
  uint32_t running = ++running_;
  for (uint32_t peak = peakRunning_.load(); running > peak && !peakRunning_.compare_exchange_weak(peak, running);) {
  }
  bool leftInFlight = false;
  if (!Stopped() || tasks_->RunsWhenStopped()) {
    uint64_t done = 0;
    ErrorRecord e = tasks_->Run(index, &done, &leftInFlight);
    if (!e.ok()) Fail(std::move(e));
    ++work_.tasks;
    work_.bytes += done;
  }
  work_.busyNs += NowNs() - t0;
  --running_;
  if (!leftInFlight) FinishTask();
}

void Job::Fail(ErrorRecord e) {
  std::lock_guard<std::mutex> lock(errorMutex_);
  if (failed_) return;
  error_ = std::move(e);
  failed_ = true;
}

ErrorRecord Job::Error() const {
  std::lock_guard<std::mutex> lock(errorMutex_);
  return error_;
}

void Job::AddProgress(uint64_t n) {
  bytesDone_ += n;
  if (wantProgress_ && !progressPending_.exchange(true))
    if (!listener_->Progressed(shared_from_this())) progressPending_ = false;
}

uint64_t Job::TakeProgress() {
  progressPending_ = false;
  return bytesDone_.load();
}

}  // namespace penstock
