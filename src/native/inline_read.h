// Small reads on the calling thread from the page cache (inline_read.cc).
#pragma once
#include <napi.h>

namespace penstock {

void RegisterInlineRead(Napi::Env env, Napi::Object exports);

}  // namespace penstock
