// The plain objects an operation's promise resolves with (binding.ts NativeOpResult).
#pragma once
#include <napi.h>

#include "engine/io_op.h"
#include "engine/op_timeline.h"
#include "engine/work_counters.h"

namespace penstock {

// One share of the work: { tasks, bytes, busyNs, ioNs, waitNs } (binding.ts NativeWorkShare).
Napi::Object WorkShareJs(Napi::Env env, const WorkCounters& w);
// An operation's or a batch's milestones (binding.ts NativeOpTimeline); `settleNs` is now.
Napi::Object TimelineJs(Napi::Env env, const OpTimeline& t);
// The result of an operation that has drained and neither failed nor was cancelled.
Napi::Object OperationResultJs(Napi::Env env, const Operation& op);

}  // namespace penstock
