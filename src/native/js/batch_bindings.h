// The addon's entry for batched reads (batch_bindings.cc).
#pragma once
#include <napi.h>

namespace penstock {

void RegisterBatch(Napi::Env env, Napi::Object exports);

}  // namespace penstock
