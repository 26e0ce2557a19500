#include "cufile_api.h"

#include <dlfcn.h>

#include <mutex>

#include "dl_util.h"

namespace penstock {

namespace {
CuFileApi g_api;
// Never destroyed: pool workers and exit handlers read it until the process is gone.
CuFileState& g_state = *new CuFileState();
std::mutex g_mutex;

}  // namespace

const CuFileState& LoadCuFile(const std::string& path) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_state.attempted) return g_state;
  g_state.attempted = true;
  g_state.path = path;
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* err = dlerror();
    g_state.loadError = err ? err : "dlopen failed";
    return g_state;
  }
  std::string* m = &g_state.missing;
  CuFileApi& a = g_api;
  ResolveSymbol(lib, a.DriverOpen, "cuFileDriverOpen", m);
  // Recent headers turn cuFileDriverClose into a macro for the _v2 symbol; prefer it.
  ResolveSymbol(lib, a.DriverClose, "cuFileDriverClose_v2", nullptr);
  if (!a.DriverClose) ResolveSymbol(lib, a.DriverClose, "cuFileDriverClose", m);
  ResolveSymbol(lib, a.DriverGetProperties, "cuFileDriverGetProperties", m);
  ResolveSymbol(lib, a.HandleRegister, "cuFileHandleRegister", m);
  ResolveSymbol(lib, a.HandleDeregister, "cuFileHandleDeregister", m);
  ResolveSymbol(lib, a.Read, "cuFileRead", m);
  ResolveSymbol(lib, a.Write, "cuFileWrite", m);
  ResolveSymbol(lib, a.GetVersion, "cuFileGetVersion", nullptr);
  ResolveSymbol(lib, a.SetStatsLevel, "cuFileSetStatsLevel", nullptr);
  ResolveSymbol(lib, a.StatsStart, "cuFileStatsStart", nullptr);
  ResolveSymbol(lib, a.GetStatsL3, "cuFileGetStatsL3", nullptr);
  ResolveSymbol(lib, a.GetBARSizeInKB, "cuFileGetBARSizeInKB", nullptr);
  Dl_info info;
  if (a.DriverOpen && dladdr(reinterpret_cast<void*>(a.DriverOpen), &info) && info.dli_fname)
    g_state.resolvedPath = info.dli_fname;
  if (!m->empty()) {
    g_state.loadError = "the cuFile library lacks required functions: " + *m;
    return g_state;
  }
  g_state.loaded = true;
  if (a.GetVersion) a.GetVersion(&g_state.version);
  return g_state;
}

const CuFileState& CuFileStatus() { return g_state; }
CuFileState& MutableCuFileStatus() { return g_state; }
const CuFileApi& CuFile() { return g_api; }

IoFailure DecodeCuFileIoError(ssize_t ret, int savedErrno) {
  if (ret == -1) {
    if (savedErrno > kCuFileBase) return {true, savedErrno};
    return {false, savedErrno != 0 ? savedErrno : 5 /* EIO */};
  }
  int code = static_cast<int>(-ret);
  if (code > kCuFileBase) return {true, code};
  return {false, code};
}

}  // namespace penstock
