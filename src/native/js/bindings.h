// Glue shared by the binding files (starting a job is jobs.h).
#pragma once
#include <napi.h>

#include <mutex>

#include "sys/cufile_api.h"

namespace penstock {

Napi::Value FromPtr(Napi::Env env, uint64_t p);
// Held while the pool's size and the devices' slots are read or changed together, so that no
// environment sizes the pool past the slots another one is preparing.
std::mutex& PoolMutex();

// submit(spec): a transfer between a file and memory (file_specs.cc).
Napi::Value SubmitTransfer(const Napi::CallbackInfo& info);

void RegisterMemory(Napi::Env env, Napi::Object exports);
void RegisterIo(Napi::Env env, Napi::Object exports);
void RegisterDrivers(Napi::Env env, Napi::Object exports);
// The cuFile handle registered under `id` (cufileRegister), or false.
bool FindCuFileHandle(int id, CUfileHandle_t* out);
void RegisterIpc(Napi::Env env, Napi::Object exports);
void RegisterKept(Napi::Env env, Napi::Object exports);
void RegisterInlineRead(Napi::Env env, Napi::Object exports);
// scanSafetensorsHeader (header_bindings.cc).
void RegisterHeaders(Napi::Env env, Napi::Object exports);

}  // namespace penstock
