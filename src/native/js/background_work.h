// Work that runs on a background thread (libuv's pool) and settles one Promise: a driver's load,
// a device's pinned memory, cuFile's driver open. It is counted as background work, so the
// process's exit waits for it before the CUDA driver's exit handlers run.
#pragma once
#include <napi.h>

#include <functional>

#include "sys/error_record.h"

namespace penstock {

// Starts `work` on a background thread; the Promise resolves with undefined, or rejects with the
// record `work` returns.
Napi::Promise StartBackgroundWork(Napi::Env env, const char* name, std::function<ErrorRecord()> work);

}  // namespace penstock
