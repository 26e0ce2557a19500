// Module entry: one Instance per environment (main thread or worker), torn down by a cleanup
// hook that cancels and drains that environment's operations before Node frees it.
#include <dlfcn.h>
#include <napi.h>

#include <mutex>

#include "js/batch_bindings.h"
#include "js/bindings.h"
#include "js/host_memory.h"
#include "js/instance.h"
#include "engine/staging_pipe.h"
#include "sys/thread_pool.h"

namespace penstock {

namespace {

// The pool's threads and the exit drain outlive the environment that loaded the addon: when a
// worker thread loads penstock first and then ends, Node would unload the module and leave
// those threads running code that is no longer mapped. Pinning the module keeps it loaded for
// the life of the process.
void PinModule() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&PinModule), &info) && info.dli_fname)
    dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
}

}  // namespace

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  auto* instance = new Instance(env);
  env.SetInstanceData<Instance>(instance);
  env.AddCleanupHook([instance] { instance->Teardown(); });
  // Host-only programs never load CUDA: their exit drains from here.
  static std::once_flag once;
  std::call_once(once, [] {
    PinModule();
    DrainAtExit();
  });
  ThreadPool::Instance().SetIdleHook(&FlushWorkerPipes);
  RegisterMemory(env, exports);
  RegisterIo(env, exports);
  RegisterDrivers(env, exports);
  RegisterIpc(env, exports);
  RegisterInlineRead(env, exports);
  RegisterKept(env, exports);
  RegisterBatch(env, exports);
  RegisterHeaders(env, exports);
  return exports;
}

}  // namespace penstock

static Napi::Object InitModule(Napi::Env env, Napi::Object exports) { return penstock::Init(env, exports); }

NODE_API_MODULE(penstock, InitModule)
