#include <cstring>
#include <map>
#include <mutex>

#include "bindings.h"
#include "cufile_api.h"
#include "device.h"
#include "instance.h"
#include "posix_io.h"
#include "thread_pool.h"

namespace penstock {

uint64_t ToU64(const Napi::Value& v) {
  if (v.IsBigInt()) {
    bool lossless;
    return v.As<Napi::BigInt>().Uint64Value(&lossless);
  }
  return static_cast<uint64_t>(v.As<Napi::Number>().DoubleValue());
}

CUdeviceptr ToPtr(const Napi::Value& v) { return ToU64(v); }

Napi::Value FromPtr(Napi::Env env, uint64_t p) { return Napi::BigInt::New(env, p); }

char* HostData(const Napi::Value& v, size_t* length) {
  if (v.IsArrayBuffer()) {
    auto ab = v.As<Napi::ArrayBuffer>();
    *length = ab.ByteLength();
    return static_cast<char*>(ab.Data());
  }
  // SharedArrayBuffer: node-addon-api has no wrapper, so ask Node-API directly.
  void* data = nullptr;
  size_t len = 0;
  napi_status st = napi_get_arraybuffer_info(v.Env(), v, &data, &len);
  if (st != napi_ok) throw Napi::TypeError::New(v.Env(), "expected an ArrayBuffer");
  *length = len;
  return static_cast<char*>(data);
}

Napi::Object StartOperation(Napi::Env env, const OpSpec& spec, Napi::Value keep, Napi::Value progress) {
  Instance* instance = Instance::Get(env);
  auto op = std::make_shared<Operation>(instance, spec);
  auto* deferred = new Napi::Promise::Deferred(env);
  op->deferred = deferred;
  if (keep.IsObject()) op->keepAlive = Napi::Persistent(keep.As<Napi::Object>());
  if (progress.IsFunction()) op->progress = Napi::Persistent(progress.As<Napi::Function>());
  Napi::Object handle = Napi::Object::New(env);
  handle.Set("promise", deferred->Promise());
  std::weak_ptr<Operation> weak = op;
  handle.Set("cancel", Napi::Function::New(env, [weak](const Napi::CallbackInfo& info) {
               if (auto o = weak.lock()) o->Cancel();
             }));
  instance->Begin(env, op);
  op->Start();
  return handle;
}

namespace {

std::mutex g_handleMutex;
std::map<int, CUfileHandle_t> g_handles;
int g_nextHandle = 1;

Napi::Object CudaStatusJs(Napi::Env env) {
  const CudaState& s = CudaStatus();
  Napi::Object o = Napi::Object::New(env);
  o.Set("loaded", s.loaded);
  o.Set("initialized", s.initialized);
  o.Set("path", s.path);
  if (!s.resolvedPath.empty()) o.Set("resolvedPath", s.resolvedPath);
  if (!s.loadError.empty()) o.Set("error", s.loadError);
  if (!s.missing.empty()) o.Set("missing", s.missing);
  if (s.loaded) {
    o.Set("driverVersion", s.driverVersion);
    if (!s.initialized) o.Set("initError", ToJs(env, ErrorRecord::FromCuda(s.initResult, "cuInit")));
    else o.Set("deviceCount", s.deviceCount);
  }
  return o;
}

Napi::Object CuFileStatusJs(Napi::Env env) {
  const CuFileState& s = CuFileStatus();
  Napi::Object o = Napi::Object::New(env);
  o.Set("loaded", s.loaded);
  o.Set("path", s.path);
  if (!s.resolvedPath.empty()) o.Set("resolvedPath", s.resolvedPath);
  if (!s.loadError.empty()) o.Set("error", s.loadError);
  if (!s.missing.empty()) o.Set("missing", s.missing);
  if (s.version) o.Set("version", s.version);
  o.Set("driverOpen", s.driverOpen);
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

bool ReadStatsL3(std::vector<unsigned char>* block) {
  const CuFileApi& cf = CuFile();
  if (!cf.GetStatsL3) return false;
  block->assign(kStatsL3Size + 64, 0);
  return cf.GetStatsL3(block->data()).err == kCuFileSuccess;
}

void EnableStats(CuFileState& s) {
  const CuFileApi& cf = CuFile();
  if (!cf.SetStatsLevel || !cf.StatsStart || !cf.GetStatsL3) {
    s.statsError = "this cuFile release has no statistics API";
    return;
  }
  CUfileError_t r = cf.SetStatsLevel(3);
  if (r.err == kCuFileSuccess) r = cf.StatsStart();
  std::vector<unsigned char> probe;
  if (r.err == kCuFileSuccess && ReadStatsL3(&probe)) {
    s.statsLevel = 3;
    s.statsError.clear();
  } else {
    s.statsError = "cuFile refused level-3 statistics (" + CuFileErrorName(r.err) + ")";
  }
}

Napi::Value Init(const Napi::CallbackInfo& info) { return info.Env().Undefined(); }

Napi::Value SetThreads(const Napi::CallbackInfo& info) {
  ThreadPool::Instance().Resize(info[0].As<Napi::Number>().Int32Value());
  return info.Env().Undefined();
}

Napi::Value PoolInfo(const Napi::CallbackInfo& info) {
  Napi::Object o = Napi::Object::New(info.Env());
  o.Set("threads", ThreadPool::Instance().Size());
  o.Set("queued", static_cast<double>(ThreadPool::Instance().Queued()));
  return o;
}

Napi::Value CudaLoadJs(const Napi::CallbackInfo& info) {
  LoadCuda(info[0].As<Napi::String>().Utf8Value());
  return CudaStatusJs(info.Env());
}

Napi::Value CudaStatusFn(const Napi::CallbackInfo& info) { return CudaStatusJs(info.Env()); }

Napi::Value CuFileLoadJs(const Napi::CallbackInfo& info) {
  LoadCuFile(info[0].As<Napi::String>().Utf8Value());
  return CuFileStatusJs(info.Env());
}

Napi::Value CuFileStatusFn(const Napi::CallbackInfo& info) { return CuFileStatusJs(info.Env()); }

Napi::Value CuFileDriverOpenJs(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  CuFileState& s = MutableCuFileStatus();
  if (!s.loaded || s.driverAttempted) return CuFileStatusJs(env);
  CUcontext ctx;
  ErrorRecord e = RetainContext(info[0].As<Napi::Number>().Int32Value(), &ctx);
  if (!e.ok()) ThrowRecord(env, e);
  ContextGuard guard(ctx);
  s.driverAttempted = true;
  const CuFileApi& cf = CuFile();
  EnableStats(s);  // settings must precede the driver open
  s.driverResult = cf.DriverOpen();
  // Already open means another library in this process opened it: usable all the same.
  s.driverOpen = s.driverResult.err == kCuFileSuccess || s.driverResult.err == 5026;
  if (s.driverOpen) {
    if (s.statsLevel < 3) EnableStats(s);
    s.haveProps = cf.DriverGetProperties(&s.props).err == kCuFileSuccess;
  }
  return CuFileStatusJs(env);
}

Napi::Value CuFileRegisterJs(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Object o = Napi::Object::New(env);
  const CuFileState& s = CuFileStatus();
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
  descr.handle.fd = info[0].As<Napi::Number>().Int32Value();
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
  int id = info[0].As<Napi::Number>().Int32Value();
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
  std::vector<unsigned char> b;
  if (CuFileStatus().statsLevel < 3 || !ReadStatsL3(&b)) return env.Null();
  uint32_t gpus;
  memcpy(&gpus, b.data() + kStatsL3NumGpus, sizeof gpus);
  if (gpus > kStatsL3MaxGpus) gpus = kStatsL3MaxGpus;
  Napi::Array arr = Napi::Array::New(env, gpus);
  static const struct { const char* name; size_t off; } fields[] = {
      {"totalReads", 48}, {"p2pReads", 56}, {"nvfsReads", 64}, {"posixReads", 72}, {"unalignedReads", 80},
      {"readErrors", 112}, {"nvfsWrites", 168}, {"posixWrites", 176}, {"registeredBytes", 240}};
  for (uint32_t g = 0; g < gpus; ++g) {
    Napi::Object o = Napi::Object::New(env);
    for (const auto& f : fields) {
      uint64_t v;
      memcpy(&v, b.data() + kStatsL3PerGpu + g * kStatsL3GpuStride + f.off, sizeof v);
      o.Set(f.name, static_cast<double>(v));
    }
    arr.Set(g, o);
  }
  return arr;
}

Napi::Value Submit(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Object s = info[0].As<Napi::Object>();
  OpSpec spec;
  spec.write = s.Get("write").ToBoolean();
  std::string route = s.Get("route").As<Napi::String>().Utf8Value();
  spec.route = route == "posix-host" ? Route::PosixHost : route == "posix-device" ? Route::PosixDevice : Route::CuFile;
  spec.fd = s.Get("fd").As<Napi::Number>().Int32Value();
  spec.directFd = s.Get("directFd").As<Napi::Number>().Int32Value();
  spec.fileOffset = ToU64(s.Get("fileOffset"));
  spec.size = ToU64(s.Get("size"));
  spec.taskSize = ToU64(s.Get("taskSize"));
  Napi::Value keep = env.Undefined();
  if (spec.route == Route::PosixHost) {
    keep = s.Get("hostBuffer");
    size_t length = 0;
    spec.host = HostData(keep, &length) + ToU64(s.Get("hostOffset"));
  } else {
    spec.dev = ToPtr(s.Get("devicePtr"));
    spec.device = s.Get("device").As<Napi::Number>().Int32Value();
    if (spec.route == Route::PosixDevice && !PreparedDevice(spec.device))
      ThrowRecord(env, ErrorRecord::Misuse("ERR_PENSTOCK_INTERNAL", "device not prepared"));
  }
  if (spec.route == Route::CuFile) {
    std::lock_guard<std::mutex> lock(g_handleMutex);
    auto it = g_handles.find(s.Get("cufileHandle").As<Napi::Number>().Int32Value());
    if (it == g_handles.end())
      ThrowRecord(env, ErrorRecord::Misuse("ERR_PENSTOCK_INTERNAL", "unknown cuFile handle"));
    spec.cufile = it->second;
    spec.cufileBase = ToPtr(s.Get("cufileBase"));
    spec.cufileBaseOffset = ToU64(s.Get("cufileBaseOffset"));
  }
  auto count = [&](const char* key, uint32_t fallback) {
    Napi::Value v = s.Get(key);
    return v.IsNumber() ? v.As<Napi::Number>().Uint32Value() : fallback;
  };
  spec.maxRunners = count("maxRunners", 0);
  spec.mappedRunners = spec.route == Route::PosixDevice && !spec.write ? count("mappedRunners", 0) : 0;
  if (s.Get("mappedPiece").IsNumber()) spec.mappedPiece = ToU64(s.Get("mappedPiece"));
  if (s.Get("writePiece").IsNumber()) spec.writePiece = ToU64(s.Get("writePiece"));
  Napi::Value staging = s.Get("hostStaging");
  spec.hostStaging = staging.IsBoolean() ? staging.As<Napi::Boolean>().Value() : true;
  Napi::Value progress = s.Get("progress");
  spec.wantProgress = progress.IsFunction();
  return StartOperation(env, spec, keep, progress);
}

Napi::Value ResidencyJs(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), Residency(info[0].As<Napi::Number>().Int32Value(), ToU64(info[1]), ToU64(info[2]),
                                                 info[3].As<Napi::Number>().Int32Value()));
}

Napi::Value DropCacheJs(const Napi::CallbackInfo& info) {
  int e = DropCache(info[0].As<Napi::Number>().Int32Value());
  if (e) ThrowRecord(info.Env(), ErrorRecord::Os(e, "posix_fadvise"));
  return info.Env().Undefined();
}

Napi::Value Inflight(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), static_cast<double>(Instance::Get(info.Env())->Inflight()));
}

}  // namespace

void RegisterIo(Napi::Env env, Napi::Object exports) {
  exports.Set("init", Napi::Function::New(env, Init));
  exports.Set("setThreads", Napi::Function::New(env, SetThreads));
  exports.Set("poolInfo", Napi::Function::New(env, PoolInfo));
  exports.Set("cudaLoad", Napi::Function::New(env, CudaLoadJs));
  exports.Set("cudaStatus", Napi::Function::New(env, CudaStatusFn));
  exports.Set("cufileLoad", Napi::Function::New(env, CuFileLoadJs));
  exports.Set("cufileStatus", Napi::Function::New(env, CuFileStatusFn));
  exports.Set("cufileDriverOpen", Napi::Function::New(env, CuFileDriverOpenJs));
  exports.Set("cufileRegister", Napi::Function::New(env, CuFileRegisterJs));
  exports.Set("cufileDeregister", Napi::Function::New(env, CuFileDeregisterJs));
  exports.Set("cufileStats", Napi::Function::New(env, CuFileStatsJs));
  exports.Set("submit", Napi::Function::New(env, Submit));
  exports.Set("inflight", Napi::Function::New(env, Inflight));
  exports.Set("residency", Napi::Function::New(env, ResidencyJs));
  exports.Set("dropCache", Napi::Function::New(env, DropCacheJs));
}

}  // namespace penstock
