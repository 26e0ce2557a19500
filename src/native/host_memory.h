// Page-locked host memory handed to JS as a real ArrayBuffer over the same bytes (no copy).
#pragma once
#include <napi.h>

#include "errors.h"

namespace penstock {

Napi::ArrayBuffer PinnedAlloc(Napi::Env env, size_t size);
// Detaches the ArrayBuffer, so every view of it becomes empty, and frees the memory.
void PinnedFree(Napi::Env env, Napi::ArrayBuffer buffer);
// From environment teardown on: leave pinned memory to the process's exit.
void PinnedStopFreeing();

}  // namespace penstock
