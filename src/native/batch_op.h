// Batched reads: one operation carrying many byte ranges of one or several files into host or
// device memory (batch_op.cc). TypeScript plans everything (which ranges share one pread, how
// reads are grouped into tasks, the order in staging); this code carries the plan out.
#pragma once
#include <napi.h>

namespace penstock {

void RegisterBatch(Napi::Env env, Napi::Object exports);

}  // namespace penstock
