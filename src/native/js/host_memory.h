// Page-locked host memory handed to JS as a real ArrayBuffer over the same bytes (no copy).
//
// A block is freed once both its JS side is gone (free() detached it, or the ArrayBuffer was
// collected) and no operation uses it. Operations hold a PinnedUse for the memory they touch, so
// neither free(), nor a collection, nor a worker thread's environment running the ArrayBuffer's
// finalizer at its exit can free memory under a task. Blocks are found by address only while
// allocated: the entry goes with the cuMemFreeHost, so an address the allocator hands out again
// can never be mistaken for (or erased as) an old block.
#pragma once
#include <napi.h>

#include "js/errors.h"
#include "engine/pinned_use.h"

namespace penstock {

Napi::ArrayBuffer PinnedAlloc(Napi::Env env, size_t size);
// Detaches the ArrayBuffer, so every view of it becomes empty, and frees the memory. Throws
// ERR_PENSTOCK_BUFFER_BUSY while an operation uses it.
void PinnedFree(Napi::Env env, Napi::ArrayBuffer buffer);

}  // namespace penstock
