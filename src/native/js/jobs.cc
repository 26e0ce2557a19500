#include "js/jobs.h"

#include "engine/task_claims.h"
#include "js/args.h"
#include "js/errors.h"
#include "js/js_settlement.h"

namespace penstock {

Napi::Value ProgressArg(Napi::Env env, const SpecReader& s) {
  Napi::Value progress = s.Has("progress") ? s.Require("progress") : env.Undefined();
  if (!progress.IsUndefined() && !progress.IsFunction())
    ThrowRecord(env, ErrorRecord::Misuse("ERR_PENSTOCK_INVALID_ARGUMENT", "progress must be a function"));
  return progress;
}

void CheckTaskSize(Napi::Env env, uint64_t size, uint64_t taskSize) {
  if (taskSize == 0) ThrowRecord(env, ErrorRecord::Misuse("ERR_PENSTOCK_INVALID_ARGUMENT", "taskSize must be positive"));
  if ((size + taskSize - 1) / taskSize > TaskClaims::kMaxTasks)
    ThrowRecord(env, ErrorRecord::Misuse("ERR_PENSTOCK_INVALID_ARGUMENT", "taskSize cuts the operation into too many tasks"));
}

Napi::Object StartJob(Napi::Env env, std::unique_ptr<JobTasks> tasks, JobResultJs result, Napi::Value keep,
                      Napi::Value progress, std::unique_ptr<PinnedUse> pinned) {
  Instance* instance = Instance::Get(env);
  auto job = std::make_shared<Job>(instance, std::move(tasks), progress.IsFunction(), std::move(pinned));
  auto js = std::make_unique<JsSettlement>(env, keep, progress);
  Napi::Object handle = Napi::Object::New(env);
  handle.Set("promise", js->Promise());
  uint64_t id = instance->Start(env, job, std::move(js), result);
  // Read-only: `cancel` goes by it.
  handle.DefineProperty(Napi::PropertyDescriptor::Value("id", Napi::Number::New(env, static_cast<double>(id)), napi_enumerable));
  handle.Set("cancel", instance->CancelFunction(env));
  return handle;
}

}  // namespace penstock
