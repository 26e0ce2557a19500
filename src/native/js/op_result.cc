#include "js/op_result.h"

#include "engine/batch_read.h"
#include "engine/copy_task.h"
#include "engine/file_tasks.h"
#include "engine/kept_read.h"
#include "engine/mapped_read.h"
#include "js/errors.h"

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

namespace {

// What every single transfer reports: its bytes, its tasks, the share its runners carried.
Napi::Object TransferJs(Napi::Env env, const Job& job, uint64_t bytes) {
  Napi::Object result = Napi::Object::New(env);
  result.Set("bytes", static_cast<double>(bytes));
  result.Set("tasks", static_cast<double>(job.Tasks()));
  result.Set("peakTasks", job.PeakTasks());
  result.Set("routeShare", WorkShareJs(env, job.Work()));
  result.Set("timeline", TimelineJs(env, job.Timeline()));
  return result;
}

// A file transfer's O_DIRECT refusals, if any.
Napi::Object WithDirectFallback(Napi::Env env, Napi::Object result, const FileTasks& kind) {
  if (uint64_t pieces = kind.DirectFallbacks()) {
    Napi::Object f = Napi::Object::New(env);
    f.Set("pieces", static_cast<double>(pieces));
    f.Set("record", ToJs(env, kind.DirectFallbackRecord()));
    result.Set("directFallback", f);
  }
  return result;
}

}  // namespace

// A file transfer's bytes: the size, or less where the file ended.
Napi::Object ResultJs(Napi::Env env, const Job& job, const HostTransfer& kind) {
  return WithDirectFallback(env, TransferJs(env, job, kind.BytesMoved()), kind);
}

Napi::Object ResultJs(Napi::Env env, const Job& job, const CuFileTransfer& kind) {
  return WithDirectFallback(env, TransferJs(env, job, kind.BytesMoved()), kind);
}

Napi::Object ResultJs(Napi::Env env, const Job& job, const StagedTransfer& kind) {
  Napi::Object result = TransferJs(env, job, kind.BytesMoved());
  if (const MappedRunner* m = kind.Mapped()) {
    Napi::Object share = WorkShareJs(env, m->Work());
    ErrorRecord refusal = m->Refusal();
    if (!refusal.ok()) share.Set("error", ToJs(env, refusal));
    result.Set("mapped", share);
  }
  if (kind.Gathered()) result.Set("orderedCopies", static_cast<double>(kind.OrderedCopies()));
  return WithDirectFallback(env, result, kind);
}

Napi::Object ResultJs(Napi::Env env, const Job& job, const BufferCopy& kind) { return TransferJs(env, job, kind.Size()); }
Napi::Object ResultJs(Napi::Env env, const Job& job, const KeptRead& kind) { return TransferJs(env, job, kind.Size()); }

Napi::Object ResultJs(Napi::Env env, const Job& job, const BatchRead& kind) {
  Napi::Object result = Napi::Object::New(env);
  result.Set("preads", static_cast<double>(kind.Preads()));
  result.Set("copies", static_cast<double>(kind.Copies()));
  result.Set("copyBatches", static_cast<double>(kind.CopyBatches()));
  result.Set("unbatchedFills", static_cast<double>(kind.UnbatchedFills()));
  result.Set("busyNs", static_cast<double>(job.Work().busyNs.load()));
  result.Set("ioNs", static_cast<double>(job.Work().ioNs.load()));
  result.Set("waitNs", static_cast<double>(job.Work().waitNs.load()));
  result.Set("timeline", TimelineJs(env, job.Timeline()));
  result.Set("ringReads", static_cast<double>(kind.RingReads()));
  if (kind.RingError()) result.Set("ringError", ToJs(env, ErrorRecord::Os(kind.RingError(), "io_uring")));
  else result.Set("ringError", env.Null());
  const auto& failed = kind.ReadErrors();
  Napi::Array errors = Napi::Array::New(env, failed.size());
  for (size_t i = 0; i < failed.size(); ++i) {
    Napi::Object e = Napi::Object::New(env);
    e.Set("read", failed[i].first);
    e.Set("error", ToJs(env, failed[i].second));
    errors.Set(static_cast<uint32_t>(i), e);
  }
  result.Set("readErrors", errors);
  return result;
}

}  // namespace penstock
