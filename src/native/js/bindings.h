// Glue shared by the binding files: argument conversion and starting an operation.
#pragma once
#include <napi.h>

#include <memory>
#include <mutex>

#include "engine/issued_copy.h"
#include "engine/op_spec.h"
#include "sys/cufile_api.h"

namespace penstock {

Napi::Value FromPtr(Napi::Env env, uint64_t p);
// Held while the pool's size and the devices' slots are read or changed together, so that no
// environment sizes the pool past the slots another one is preparing.
std::mutex& PoolMutex();

class SpecReader;

// The spec's optional `progress`: undefined or a function (anything else throws); sets
// spec->wantProgress.
Napi::Value ProgressArg(Napi::Env env, const SpecReader& s, OpSpec* spec);
// Throws unless spec.taskSize is positive and cuts spec.size into no more tasks than an operation
// can claim.
void CheckTaskSize(Napi::Env env, const OpSpec& spec);

// Starts `spec` and returns { promise, cancel }. `keep` stays referenced until it settles.
// `issued`: the copy already in flight that the operation's one task waits for.
Napi::Object StartOperation(Napi::Env env, const OpSpec& spec, Napi::Value keep, Napi::Value progress,
                            std::unique_ptr<IssuedCopy> issued = nullptr);

void RegisterMemory(Napi::Env env, Napi::Object exports);
void RegisterIo(Napi::Env env, Napi::Object exports);
void RegisterDrivers(Napi::Env env, Napi::Object exports);
// The cuFile handle registered under `id` (cufileRegister), or false.
bool FindCuFileHandle(int id, CUfileHandle_t* out);
void RegisterIpc(Napi::Env env, Napi::Object exports);
void RegisterKept(Napi::Env env, Napi::Object exports);
void RegisterInlineRead(Napi::Env env, Napi::Object exports);

}  // namespace penstock
