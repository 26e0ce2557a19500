#include "js/instance.h"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <set>
#include <vector>

#include "engine/live_operations.h"

namespace penstock {

namespace {
// Never destroyed: read by workers and by the exit handler until the very end.
std::mutex& g_registryMutex = *new std::mutex();
std::set<Instance*>& g_instances = *new std::set<Instance*>();

void OnExit() {
  {
    std::lock_guard<std::mutex> lock(g_registryMutex);
    for (Instance* i : g_instances) i->CancelAll();
  }
  RefuseBackgroundWork();
  // Running tasks finish their current pread or copy, and background work its driver call; a
  // stuck device does not hold exit forever.
  WaitForLiveOperations(std::chrono::seconds(10));
}
}  // namespace

void DrainAtExit() { std::atexit(OnExit); }

void Instance::CancelAll() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& entry : live_) entry.second.job->Cancel();
}

Instance::Instance(Napi::Env env) {
  {
    std::lock_guard<std::mutex> lock(g_registryMutex);
    g_instances.insert(this);
  }
  tsfn_ = Tsfn::New(env, "penstock-completions", 0, 1, nullptr);
  // Idle until an operation is in flight: an idle penstock must not keep the process alive.
  tsfn_.Unref(env);
  // Deleted with the instance data, as the environment goes (references may be deleted there).
  cancel_ = Napi::Persistent(Napi::Function::New(env, CancelJs, "cancel"));
}

Napi::Value Instance::CancelJs(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Value self = info.This();
  if (!self.IsObject()) return env.Undefined();
  Napi::Value id = self.As<Napi::Object>().Get("id");
  if (!id.IsNumber()) return env.Undefined();
  double n = id.As<Napi::Number>().DoubleValue();
  Instance* instance = Get(env);
  std::lock_guard<std::mutex> lock(instance->mutex_);
  auto it = n >= 1 ? instance->live_.find(static_cast<uint64_t>(n)) : instance->live_.end();
  if (it != instance->live_.end()) it->second.job->Cancel();
  return env.Undefined();
}

Instance* Instance::Get(Napi::Env env) { return env.GetInstanceData<Instance>(); }

uint64_t Instance::Start(Napi::Env env, std::shared_ptr<Job> job, std::unique_ptr<JsSettlement> js, JobResultJs result) {
  uint64_t id;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (live_.empty()) tsfn_.Ref(env);
    id = nextId_++;
    job->SetId(id);
    live_[id] = Live{job, std::move(js), result};
    ++running_;
    EnterLiveOperation();
  }
  job->Start();
  return id;
}

size_t Instance::Inflight() {
  std::lock_guard<std::mutex> lock(mutex_);
  return live_.size();
}

bool Instance::Post(std::shared_ptr<Job> job, bool done) {
  auto* ev = new Event{std::move(job), done};
  if (tsfn_.NonBlockingCall(ev) != napi_ok) {
    delete ev;
    return false;
  }
  return true;
}

bool Instance::Progressed(const std::shared_ptr<Job>& job) { return Post(job, false); }

void Instance::Drained(const std::shared_ptr<Job>& job) {
  // Before the Promise can settle: whatever runs after it must see this job as done.
  LeaveLiveOperation();
  Post(job, true);
  std::lock_guard<std::mutex> lock(mutex_);
  --running_;
  if (running_ == 0) drained_.notify_all();
}

Instance::Live* Instance::LiveOf(const Job* job) {
  // Entries go only on this thread (Settle, Teardown), so the pointer outlives the lock: JS
  // called through it may start jobs, which takes the lock again (an unordered_map's elements
  // stay where they are as others are added).
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = live_.find(job->Id());
  return it == live_.end() ? nullptr : &it->second;
}

void Instance::Settle(Napi::Env env, const std::shared_ptr<Job>& job) {
  if (Live* live = LiveOf(job.get())) {
    JobResultJs result = live->result;
    live->js->Settle(env, job->TakeProgress(), job->Cancelled(), job->Failed(), job->Error(), [&] { return result(env, *job); });
  }
  std::lock_guard<std::mutex> lock(mutex_);
  live_.erase(job->Id());
  if (live_.empty()) tsfn_.Unref(env);
}

void Instance::Deliver(Napi::Env env, Napi::Function, std::nullptr_t*, Event* event) {
  std::unique_ptr<Event> ev(event);
  if (env == nullptr) return;  // the environment is being torn down
  Instance* self = Get(env);
  try {
    Napi::HandleScope scope(env);
    if (ev->done) {
      self->Settle(env, ev->job);
    } else if (Live* live = self->LiveOf(ev->job.get())) {
      live->js->Progress(env, ev->job->TakeProgress());
    }
  } catch (const Napi::Error&) {
    // A terminating worker refuses to run JS (resolving a Promise fails there). Nothing can be
    // reported to an environment that is going away, and throwing out of here would abort.
  }
}

void Instance::Teardown() {
  {
    std::lock_guard<std::mutex> lock(g_registryMutex);
    g_instances.erase(this);
  }
  std::unique_lock<std::mutex> lock(mutex_);
  for (auto& entry : live_) entry.second.job->Cancel();
  // Tasks already running finish their current pread or copy; queued ones see the cancel flag
  // and skip. Waiting here means no worker touches this environment's memory after it is gone.
  drained_.wait(lock, [&] { return running_ == 0; });
  // The environment is going away: its references must not be deleted through it later, so the
  // unsettled jobs' JS sides are abandoned and left behind on purpose (the process is
  // ending or the worker is), in a list that is never destroyed: kept, not lost.
  if (!live_.empty()) {
    static auto* abandoned = new std::vector<Live>();
    std::lock_guard<std::mutex> keep(g_registryMutex);
    for (auto& entry : live_) {
      entry.second.js->Abandon();
      abandoned->push_back(std::move(entry.second));
    }
  }
  live_.clear();
  tsfn_.Abort();
}

}  // namespace penstock
