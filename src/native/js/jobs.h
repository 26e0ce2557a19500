// The one way the bindings start work on the pool: a job (engine/job.h) of any kind, live in
// its environment (instance.h) until its promise settles, behind the one handle shape
// { promise, id, cancel }. Each kind's spec reader (file_specs.cc, kept_bindings.cc,
// memory_bindings.cc, batch_bindings.cc) builds the kind's tasks and hands them here.
#pragma once
#include <napi.h>

#include <cstdint>
#include <memory>

#include "engine/job.h"
#include "js/instance.h"
#include "js/op_result.h"

namespace penstock {

class SpecReader;

// The spec's optional `progress`: undefined or a function (anything else throws).
Napi::Value ProgressArg(Napi::Env env, const SpecReader& s);
// Throws unless `taskSize` is positive and cuts `size` into no more tasks than a job can claim.
void CheckTaskSize(Napi::Env env, uint64_t size, uint64_t taskSize);

// Starts `tasks` as a job and returns its handle. `keep` stays referenced until it settles;
// `progress` is called with the bytes done when it is a function; `pinned` is held until the
// last task is done.
Napi::Object StartJob(Napi::Env env, std::unique_ptr<JobTasks> tasks, JobResultJs result, Napi::Value keep,
                      Napi::Value progress, std::unique_ptr<PinnedUse> pinned = nullptr);

// The same, for a kind whose promise resolves with ResultJs(env, job, kind) (op_result.h).
template <typename Tasks>
Napi::Object StartJob(Napi::Env env, std::unique_ptr<Tasks> tasks, Napi::Value keep, Napi::Value progress,
                      std::unique_ptr<PinnedUse> pinned = nullptr) {
  JobResultJs result = [](Napi::Env e, const Job& job) { return ResultJs(e, job, static_cast<const Tasks&>(job.Kind())); };
  return StartJob(env, std::unique_ptr<JobTasks>(std::move(tasks)), result, keep, progress, std::move(pinned));
}

}  // namespace penstock
