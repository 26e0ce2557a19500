// The one job core under every piece of work the pool carries for JavaScript: a file transfer
// (any route), a buffer copy, a read of kept pages, a batch of reads. A job is cut into tasks;
// runners take them in turn; the job counts its work, its progress and its milestones, stops on
// cancel or on its first failure, and drains once its last task and its last hold are done.
// What the tasks do is the job's JobTasks, one class per kind, each with its own plain
// description (no kind reads another's fields). Worker-side state only: the JS side (the
// promise, the values its tasks use, the progress callback) is held by the bindings
// (js/instance.h), which this class reaches only through JobListener.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>

#include "engine/op_timeline.h"
#include "engine/pinned_use.h"
#include "engine/task_claims.h"
#include "engine/work_counters.h"
#include "sys/error_record.h"

namespace penstock {

class Job;

// Where a job's progress and end go (js/instance.cc hands both to the JS thread).
class JobListener {
 public:
  // Any thread. False when it cannot be delivered (the environment is going away).
  virtual bool Progressed(const std::shared_ptr<Job>& job) = 0;
  // The last task is done and no runner counts anything into the job any more.
  virtual void Drained(const std::shared_ptr<Job>& job) = 0;

 protected:
  ~JobListener() = default;
};

// One count of a job's outstanding work that is not a task: the job cannot drain (and so
// settle) while a hold is alive. Taken with Job::Hold(), given back exactly once: by Release()
// or when it goes out of scope.
class DrainHold {
 public:
  DrainHold() = default;
  DrainHold(DrainHold&& o) noexcept = default;
  DrainHold& operator=(DrainHold&& o) noexcept {
    Release();
    job_ = std::move(o.job_);
    return *this;
  }
  DrainHold(const DrainHold&) = delete;
  DrainHold& operator=(const DrainHold&) = delete;
  ~DrainHold() { Release(); }
  void Release();

 private:
  friend class Job;
  explicit DrainHold(std::shared_ptr<Job> job) : job_(std::move(job)) {}
  std::shared_ptr<Job> job_;
};

// What one kind of job does with its tasks. Owned by its job, which it reaches through job().
class JobTasks {
 public:
  virtual ~JobTasks() = default;
  JobTasks() = default;
  JobTasks(const JobTasks&) = delete;
  JobTasks& operator=(const JobTasks&) = delete;

  // How many tasks (at most TaskClaims::kMaxTasks; the bindings check it).
  virtual uint64_t TaskCount() const = 0;
  // At most this many tasks in flight (0: one per pool thread).
  virtual uint32_t MaxRunners() const { return 0; }
  // Main thread, once the tasks are unclaimed and before `runners` pool runners are queued: the
  // kind may queue work of its own in their place; returns how many of them it replaced.
  virtual uint64_t Starting(uint64_t runners) { return 0; }
  // Runs task `index` on the calling worker: the bytes it moved go to *done. It may leave work
  // in flight and set *leftInFlight: the task is then finished later with job().FinishTask().
  virtual ErrorRecord Run(uint64_t index, uint64_t* done, bool* leftInFlight) = 0;
  // Whether a task runs even once the job stopped (a copy already issued: its bytes are moving).
  virtual bool RunsWhenStopped() const { return false; }
  // The last task and hold are done (any thread), before the listener hears of it.
  virtual void Drained() {}

 protected:
  Job& job() const { return *job_; }

 private:
  friend class Job;
  Job* job_ = nullptr;
};

class Job : public std::enable_shared_from_this<Job> {
 public:
  // `pinned`: the pinned block the job's host memory lies in (if any), held until the last task
  // is done (not until the promise settles, which an exiting environment may never get to).
  Job(JobListener* listener, std::unique_ptr<JobTasks> tasks, bool wantProgress, std::unique_ptr<PinnedUse> pinned);
  ~Job();

  // Queues the runners on the pool. Main thread.
  void Start();
  void Cancel() { cancelled_ = true; }
  // Its id among its environment's live jobs (js/instance.h), given before Start().
  void SetId(uint64_t id) { id_ = id; }
  uint64_t Id() const { return id_; }

  // For the job's runners and its kind's own workers.
  bool Stopped() const { return cancelled_ || failed_; }
  TaskClaims& claims() { return claims_; }
  // Runs task `index` on the calling worker, counted in the job's work.
  void RunTask(uint64_t index);
  // Counts one task as finished; the last one (with no hold left) drains the job.
  void FinishTask();
  DrainHold Hold();
  // The first failure is the job's error; later ones are dropped.
  void Fail(ErrorRecord e);
  void AddProgress(uint64_t n);
  // The work its runners carried (a kind's own worker may keep counters of its own).
  WorkCounters& Work() { return work_; }

  // What it came to, for the main thread: read once the job has drained, except TakeProgress()
  // (any time).
  bool Cancelled() const { return cancelled_; }
  bool Failed() const { return failed_; }
  ErrorRecord Error() const;
  uint64_t Tasks() const { return taskCount_; }
  uint32_t PeakTasks() const { return peakRunning_; }
  const WorkCounters& Work() const { return work_; }
  const OpTimeline& Timeline() const { return timeline_; }
  const JobTasks& Kind() const { return *tasks_; }
  // Bytes done so far; clears the flag that keeps progress from being posted twice.
  uint64_t TakeProgress();

 private:
  void RunNext();
  void Drained();

  JobListener* listener_;
  std::unique_ptr<JobTasks> tasks_;
  const bool wantProgress_;
  std::unique_ptr<PinnedUse> pinned_;
  uint64_t id_ = 0;
  uint64_t taskCount_ = 0;
  uint32_t maxRunners_ = 0;
  uint64_t runners_ = 0;  // pool runners Start queued (work a kind queued in their place not counted)
  TaskClaims claims_;
  // Tasks not yet finished, plus holds.
  std::atomic<uint64_t> remaining_{0};
  WorkCounters work_;
  std::atomic<uint32_t> running_{0};  // tasks of this job running now, and the most at once
  std::atomic<uint32_t> peakRunning_{0};
  std::atomic<uint64_t> bytesDone_{0};
  std::atomic<bool> progressPending_{false};
  OpTimeline timeline_;
  std::atomic<bool> cancelled_{false};
  std::atomic<bool> failed_{false};
  mutable std::mutex errorMutex_;
  ErrorRecord error_;
};

}  // namespace penstock
