// Glue shared by the binding files: argument conversion and starting an operation.
#pragma once
#include <napi.h>

#include "io_op.h"

namespace penstock {

uint64_t ToU64(const Napi::Value& v);
CUdeviceptr ToPtr(const Napi::Value& v);
Napi::Value FromPtr(Napi::Env env, uint64_t p);
// Host memory of an ArrayBuffer or SharedArrayBuffer.
char* HostData(const Napi::Value& v, size_t* length);

// Starts `spec` and returns { promise, cancel }. `keep` stays referenced until it settles.
Napi::Object StartOperation(Napi::Env env, const OpSpec& spec, Napi::Value keep, Napi::Value progress);

void RegisterMemory(Napi::Env env, Napi::Object exports);
void RegisterIo(Napi::Env env, Napi::Object exports);
void RegisterIpc(Napi::Env env, Napi::Object exports);

}  // namespace penstock
