// Module entry: one Instance per environment (main thread or worker), torn down by a cleanup
// hook that cancels and drains that environment's operations before Node frees it.
#include <napi.h>

#include <mutex>

#include "batch_op.h"
#include "bindings.h"
#include "host_memory.h"
#include "inline_read.h"
#include "instance.h"
#include "io_op.h"
#include "thread_pool.h"

namespace penstock {

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  auto* instance = new Instance(env);
  env.SetInstanceData<Instance>(instance);
  env.AddCleanupHook([instance] { instance->Teardown(); });
  // Host-only programs never load CUDA: their exit drains from here.
  static std::once_flag once;
  std::call_once(once, [] { DrainAtExit(); });
  ThreadPool::Instance().SetIdleHook(&Operation::FlushDeferred);
  RegisterMemory(env, exports);
  RegisterIo(env, exports);
  RegisterIpc(env, exports);
  RegisterInlineRead(env, exports);
  RegisterBatch(env, exports);
  return exports;
}

}  // namespace penstock

static Napi::Object InitModule(Napi::Env env, Napi::Object exports) { return penstock::Init(env, exports); }

NODE_API_MODULE(penstock, InitModule)
