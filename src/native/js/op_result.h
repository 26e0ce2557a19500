// The plain objects a job's promise resolves with (native-contract.ts NativeOpResult and
// NativeBatchResult): one ResultJs per kind of job, for a job that has drained and neither
// failed nor was cancelled.
#pragma once
#include <napi.h>

#include "engine/job.h"
#include "engine/op_timeline.h"
#include "engine/work_counters.h"

namespace penstock {

class HostTransfer;
class StagedTransfer;
class CuFileTransfer;
class BufferCopy;
class KeptRead;
class BatchRead;

// One share of the work: { tasks, bytes, busyNs, ioNs, waitNs } (NativeWorkShare).
Napi::Object WorkShareJs(Napi::Env env, const WorkCounters& w);
// A job's milestones (NativeOpTimeline); `settleNs` is now.
Napi::Object TimelineJs(Napi::Env env, const OpTimeline& t);

Napi::Object ResultJs(Napi::Env env, const Job& job, const HostTransfer& kind);
Napi::Object ResultJs(Napi::Env env, const Job& job, const StagedTransfer& kind);
Napi::Object ResultJs(Napi::Env env, const Job& job, const CuFileTransfer& kind);
Napi::Object ResultJs(Napi::Env env, const Job& job, const BufferCopy& kind);
Napi::Object ResultJs(Napi::Env env, const Job& job, const KeptRead& kind);
Napi::Object ResultJs(Napi::Env env, const Job& job, const BatchRead& kind);

}  // namespace penstock
