#include "js/op_result.h"

#include "js/errors.h"
#include "engine/mapped_read.h"

namespace penstock {

Napi::Object WorkShareJs(Napi::Env env, const WorkCounters& w) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("tasks", static_cast<double>(w.tasks.load()));
  o.Set("bytes", static_cast<double>(w.bytes.load()));
  o.Set("busyNs", static_cast<double>(w.busyNs.load()));
  o.Set("ioNs", static_cast<double>(w.ioNs.load()));
  o.Set("waitNs", static_cast<double>(w.waitNs.load()));
  return o;
}

Napi::Object TimelineJs(Napi::Env env, const OpTimeline& t) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("startNs", static_cast<double>(t.StartNs()));
  o.Set("firstTaskNs", static_cast<double>(t.FirstTaskNs()));
  o.Set("lastRunnerStartNs", static_cast<double>(t.LastRunnerStartNs()));
  o.Set("lastTaskEndNs", static_cast<double>(t.LastTaskEndNs()));
  o.Set("drainedNs", static_cast<double>(t.DrainedNs()));
  o.Set("settleNs", static_cast<double>(NowNs()));
  return o;
}

Napi::Object OperationResultJs(Napi::Env env, const Operation& op) {
  Napi::Object result = Napi::Object::New(env);
  result.Set("bytes", static_cast<double>(op.BytesMoved()));
  result.Set("tasks", static_cast<double>(op.Tasks()));
  result.Set("peakTasks", op.PeakTasks());
  result.Set("routeShare", WorkShareJs(env, op.RouteWork()));
  result.Set("timeline", TimelineJs(env, op.Timeline()));
  if (const MappedRunner* m = op.Mapped()) {
    Napi::Object share = WorkShareJs(env, m->Work());
    ErrorRecord refusal = m->Refusal();
    if (!refusal.ok()) share.Set("error", ToJs(env, refusal));
    result.Set("mapped", share);
  }
  if (op.Gathered()) result.Set("orderedCopies", static_cast<double>(op.OrderedCopies()));
  if (uint64_t pieces = op.DirectFallbacks()) {
    Napi::Object f = Napi::Object::New(env);
    f.Set("pieces", static_cast<double>(pieces));
    f.Set("record", ToJs(env, op.DirectFallbackRecord()));
    result.Set("directFallback", f);
  }
  return result;
}

}  // namespace penstock
