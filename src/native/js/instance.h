// Per-environment state: the one thread-safe function through which workers hand finished jobs
// (and progress) back to the JS thread, and the live jobs (engine/job.h: operations and
// batches alike) with their JS sides, so that environment teardown can cancel them and wait for
// their tasks instead of crashing.
#pragma once
#include <napi.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "engine/job.h"
#include "js/js_settlement.h"

namespace penstock {

// From the first call on, the process's exit first cancels every environment's jobs and
// waits for their running tasks, before exit handlers registered earlier (the CUDA driver's
// among them, when this runs after it is loaded) tear anything down.
void DrainAtExit();

// The plain object a job's promise resolves with, built on the main thread once it drained,
// neither failed nor cancelled (js/op_result.h).
using JobResultJs = Napi::Object (*)(Napi::Env env, const Job& job);

struct Event {
  std::shared_ptr<Job> job;
  bool done;  // false: progress
};

class Instance final : public JobListener {
 public:
  explicit Instance(Napi::Env env);
  static Instance* Get(Napi::Env env);

  // Main thread: `job` is live with its JS side until it settles (with `result`); then starts
  // it. Its id, for the handle's `cancel`.
  uint64_t Start(Napi::Env env, std::shared_ptr<Job> job, std::unique_ptr<JsSettlement> js, JobResultJs result);
  // Main thread: the one `cancel` function of every job's handle: it cancels the live job whose
  // id is the handle's `id` (a function made per job cost microseconds on every start, and more
  // at the garbage collection of each).
  Napi::Function CancelFunction(Napi::Env env) { return cancel_.Value(); }
  size_t Inflight();

  // JobListener (any thread).
  bool Progressed(const std::shared_ptr<Job>& job) override;
  void Drained(const std::shared_ptr<Job>& job) override;

  void Teardown();
  // Cancels this environment's jobs (any thread).
  void CancelAll();

 private:
  struct Live {
    std::shared_ptr<Job> job;
    std::unique_ptr<JsSettlement> js;
    JobResultJs result = nullptr;
  };
  static Napi::Value CancelJs(const Napi::CallbackInfo& info);
  static void Deliver(Napi::Env env, Napi::Function, std::nullptr_t*, Event* event);
  using Tsfn = Napi::TypedThreadSafeFunction<std::nullptr_t, Event, Deliver>;
  bool Post(std::shared_ptr<Job> job, bool done);
  // Main thread: the live entry of a job (null once settled).
  Live* LiveOf(const Job* job);
  void Settle(Napi::Env env, const std::shared_ptr<Job>& job);

  Tsfn tsfn_;
  std::mutex mutex_;
  std::condition_variable drained_;
  std::unordered_map<uint64_t, Live> live_;  // by the job's id
  uint64_t nextId_ = 1;
  Napi::FunctionReference cancel_;
  size_t running_ = 0;  // jobs whose tasks have not all finished
};

}  // namespace penstock
