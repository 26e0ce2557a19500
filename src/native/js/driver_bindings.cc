// The JS face of the CUDA driver and cuFile libraries: loading them, their status, cuFile's
// driver open and file handles, and the background forms that let a process start moving data
// while they load (cudaWarmup, cufileDriverOpenAsync).
#include <cstring>
#include <map>
#include <mutex>

#include "engine/device.h"
#include "js/args.h"
#include "js/background_work.h"
#include "js/bindings.h"
#include "js/errors.h"
#include "js/instance.h"
#include "sys/cufile_api.h"

namespace penstock {

namespace {

// Never destroyed (read from any environment until the process is gone).
std::mutex& g_handleMutex = *new std::mutex();
std::map<int, CUfileHandle_t>& g_handles = *new std::map<int, CUfileHandle_t>();
int g_nextHandle = 1;

Napi::Object CudaStatusJs(Napi::Env env) {
  const CudaState s = CudaStatusSnapshot();
  Napi::Object o = Napi::Object::New(env);
  o.Set("loaded", s.loaded);
  o.Set("initialized", s.initialized);
  o.Set("path", s.path);
  if (!s.resolvedPath.empty()) o.Set("resolvedPath", s.resolvedPath);
  if (!s.loadError.empty()) o.Set("error", s.loadError);
  if (!s.missing.empty()) o.Set("missing", s.missing);
  if (s.loaded) {
    o.Set("driverVersion", s.driverVersion);
    o.Set("hostRegister", s.hostRegisterMissing.empty());
    if (!s.copyBatch.empty()) o.Set("copyBatch", s.copyBatch);
    if (!s.initialized) o.Set("initError", ToJs(env, ErrorRecord::FromCuda(s.initResult, "cuInit")));
    else o.Set("deviceCount", s.deviceCount);
  }
  return o;
}

Napi::Object CuFileStatusJs(Napi::Env env) {
  const CuFileState s = CuFileStatusSnapshot();
  Napi::Object o = Napi::Object::New(env);
  o.Set("loaded", s.loaded);
  o.Set("path", s.path);
  if (!s.resolvedPath.empty()) o.Set("resolvedPath", s.resolvedPath);
  if (!s.loadError.empty()) o.Set("error", s.loadError);
  if (!s.missing.empty()) o.Set("missing", s.missing);
  if (s.version) o.Set("version", s.version);
  o.Set("driverOpen", s.driverOpen);
  if (s.driverOpening) o.Set("driverOpening", true);
  if (s.driverAttempted && !s.driverOpen)
    o.Set("driverError", ToJs(env, s.driverResult.err > kCuFileBase || s.driverResult.err == 0
                                       ? ErrorRecord::FromCuFile(s.driverResult.err, "cuFileDriverOpen")
                                       : ErrorRecord::Misuse("ERR_PENSTOCK_CUFILE", s.statsError)));
  if (s.haveProps) {
    const CUfileDrvProps_t& p = s.props;
    Napi::Object props = Napi::Object::New(env);
    props.Set("nvfsMajor", p.nvfs_major);
    props.Set("nvfsMinor", p.nvfs_minor);
    props.Set("pollThresholdKiB", static_cast<double>(p.poll_thresh_size_kb));
    props.Set("maxDirectIoKiB", static_cast<double>(p.max_direct_io_size_kb));
    props.Set("dstatusflags", p.dstatusflags);
    props.Set("dcontrolflags", p.dcontrolflags);
    props.Set("fflags", p.fflags);
    props.Set("maxDeviceCacheKiB", p.max_device_cache_size);
    props.Set("perBufferCacheKiB", p.per_buffer_cache_size);
    props.Set("maxDevicePinnedKiB", p.max_device_pinned_mem_size);
    props.Set("maxBatchIo", p.max_batch_io_size);
    props.Set("maxBatchIoTimeoutMs", p.max_batch_io_timeout_msecs);
    o.Set("props", props);
  }
  o.Set("statsLevel", s.statsLevel);
  if (!s.statsError.empty() && s.driverOpen) o.Set("statsError", s.statsError);
  return o;
}

// Registered after the driver's own exit handlers, so it runs before them.
void DrainAfterCuda() {
  static std::once_flag once;
  std::call_once(once, [] { if (CudaStatus().loaded) DrainAtExit(); });
}

Napi::Value CudaLoadJs(const Napi::CallbackInfo& info) {
  LoadCuda(ArgString(Arg(info, 0, "path"), "path"));
  DrainAfterCuda();
  return CudaStatusJs(info.Env());
}

// cudaWarmup(path, ordinal): a Promise; on a background thread, loads and initialises the CUDA
// driver and retains the GPU's primary context (together about a quarter of a second), while
// the JS thread reads headers and plans. Rejects with the record of what failed.
Napi::Value CudaWarmupJs(const Napi::CallbackInfo& info) {
  std::string path = ArgString(Arg(info, 0, "path"), "path");
  int ordinal = ArgInt(Arg(info, 1, "ordinal"), "ordinal", 0, 1 << 20);
  return StartBackgroundWork(info.Env(), "penstock-cuda-warmup", [path, ordinal]() -> ErrorRecord {
    LoadCuda(path);
    DrainAfterCuda();
    CUcontext ctx;
    return RetainContext(ordinal, &ctx);
  });
}

Napi::Value CudaStatusFn(const Napi::CallbackInfo& info) { return CudaStatusJs(info.Env()); }

Napi::Value CuFileLoadJs(const Napi::CallbackInfo& info) {
  LoadCuFile(ArgString(Arg(info, 0, "path"), "path"));
  return CuFileStatusJs(info.Env());
}

Napi::Value CuFileStatusFn(const Napi::CallbackInfo& info) { return CuFileStatusJs(info.Env()); }

Napi::Value CuFileDriverOpenJs(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const CuFileState s = CuFileStatusSnapshot();
  if (!s.loaded || (s.driverAttempted && !s.driverOpening)) return CuFileStatusJs(env);
  CUcontext ctx;
  ErrorRecord e = RetainContext(ArgInt(Arg(info, 0, "ordinal"), "ordinal", 0, 1 << 20), &ctx);
  if (!e.ok()) ThrowRecord(env, e);
  ContextGuard guard(ctx);
  OpenCuFileDriver();
  return CuFileStatusJs(env);
}

// cufileDriverOpenAsync(ordinal): a Promise; opens cuFile's driver on a background thread, in the
// GPU's primary context. The status then says how it went.
Napi::Value CuFileDriverOpenAsyncJs(const Napi::CallbackInfo& info) {
  int ordinal = ArgInt(Arg(info, 0, "ordinal"), "ordinal", 0, 1 << 20);
  return StartBackgroundWork(info.Env(), "penstock-cufile-open", [ordinal]() -> ErrorRecord {
    CUcontext ctx;
    ErrorRecord e = RetainContext(ordinal, &ctx);
    if (!e.ok()) return e;
    ContextGuard guard(ctx);
    OpenCuFileDriver();
    return {};
  });
}

Napi::Value CuFileRegisterJs(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Object o = Napi::Object::New(env);
  const CuFileState s = CuFileStatusSnapshot();
  if (!s.driverOpen) {
    o.Set("error", ToJs(env, ErrorRecord::FromCuFile(5001, "cuFileHandleRegister")));
    return o;
  }
  CUcontext ctx;
  ErrorRecord e = RetainContext(0, &ctx);
  if (!e.ok()) ThrowRecord(env, e);
  ContextGuard guard(ctx);
  CUfileDescr_t descr;
  memset(&descr, 0, sizeof descr);
  descr.type = 1;
  descr.handle.fd = ArgInt(Arg(info, 0, "fd"), "fd", 0, INT32_MAX);
  CUfileHandle_t h = nullptr;
  CUfileError_t r = CuFile().HandleRegister(&h, &descr);
  if (r.err != kCuFileSuccess) {
    o.Set("error", ToJs(env, ErrorRecord::FromCuFile(r.err, "cuFileHandleRegister")));
    return o;
  }
  std::lock_guard<std::mutex> lock(g_handleMutex);
  int id = g_nextHandle++;
  g_handles[id] = h;
  o.Set("handle", id);
  return o;
}

Napi::Value CuFileDeregisterJs(const Napi::CallbackInfo& info) {
  int id = ArgInt(Arg(info, 0, "handle"), "handle", 0, INT32_MAX);
  CUfileHandle_t h = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_handleMutex);
    auto it = g_handles.find(id);
    if (it == g_handles.end()) return info.Env().Undefined();
    h = it->second;
    g_handles.erase(it);
  }
  CuFile().HandleDeregister(h);
  return info.Env().Undefined();
}

Napi::Value CuFileStatsJs(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  CuFileStatsL3 block;
  if (CuFileStatus().statsLevel < 3 || !ReadCuFileStatsL3(&block)) return env.Null();
  uint32_t gpus = block.num_gpus < kStatsL3MaxGpus ? block.num_gpus : kStatsL3MaxGpus;
  Napi::Array arr = Napi::Array::New(env, gpus);
  for (uint32_t g = 0; g < gpus; ++g) {
    const CuFileGpuStatsL3& st = block.per_gpu_stats[g];
    Napi::Object o = Napi::Object::New(env);
    o.Set("totalReads", static_cast<double>(st.n_total_reads));
    o.Set("p2pReads", static_cast<double>(st.n_p2p_reads));
    o.Set("nvfsReads", static_cast<double>(st.n_nvfs_reads));
    o.Set("posixReads", static_cast<double>(st.n_posix_reads));
    o.Set("unalignedReads", static_cast<double>(st.n_unaligned_reads));
    o.Set("readErrors", static_cast<double>(st.n_reads_err));
    o.Set("nvfsWrites", static_cast<double>(st.n_nvfs_writes));
    o.Set("posixWrites", static_cast<double>(st.n_posix_writes));
    o.Set("registeredBytes", static_cast<double>(st.reg_bytes));
    arr.Set(g, o);
  }
  return arr;
}

}  // namespace

bool FindCuFileHandle(int id, CUfileHandle_t* out) {
  std::lock_guard<std::mutex> lock(g_handleMutex);
  auto it = g_handles.find(id);
  if (it == g_handles.end()) return false;
  *out = it->second;
  return true;
}

void RegisterDrivers(Napi::Env env, Napi::Object exports) {
  exports.Set("cudaLoad", Napi::Function::New(env, CudaLoadJs));
  exports.Set("cudaWarmup", Napi::Function::New(env, CudaWarmupJs));
  exports.Set("cudaStatus", Napi::Function::New(env, CudaStatusFn));
  exports.Set("cufileLoad", Napi::Function::New(env, CuFileLoadJs));
  exports.Set("cufileStatus", Napi::Function::New(env, CuFileStatusFn));
  exports.Set("cufileDriverOpen", Napi::Function::New(env, CuFileDriverOpenJs));
  exports.Set("cufileDriverOpenAsync", Napi::Function::New(env, CuFileDriverOpenAsyncJs));
  exports.Set("cufileRegister", Napi::Function::New(env, CuFileRegisterJs));
  exports.Set("cufileDeregister", Napi::Function::New(env, CuFileDeregisterJs));
  exports.Set("cufileStats", Napi::Function::New(env, CuFileStatsJs));
}

}  // namespace penstock
