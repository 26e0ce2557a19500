#include "sys/cufile_api.h"

#include <condition_variable>
#include <mutex>

#include "sys/dl_library.h"
#include "sys/error_record.h"

namespace penstock {

namespace {
CuFileApi g_api;
// Never destroyed: pool workers and exit handlers read it until the process is gone.
CuFileState& g_state = *new CuFileState();
std::mutex g_mutex;
std::condition_variable g_opened;

}  // namespace

const CuFileState& LoadCuFile(const std::string& path) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_state.attempted) return g_state;
  g_state.attempted = true;
  g_state.path = path;
  DlLibrary lib;
  if (!lib.Open(g_state)) return g_state;
  std::string* m = &g_state.missing;
  CuFileApi& a = g_api;
  lib.Resolve(a.DriverOpen, "cuFileDriverOpen", m);
  // Recent headers turn cuFileDriverClose into a macro for the _v2 symbol; prefer it.
  lib.Resolve(a.DriverClose, "cuFileDriverClose_v2", nullptr);
  if (!a.DriverClose) lib.Resolve(a.DriverClose, "cuFileDriverClose", m);
  lib.Resolve(a.DriverGetProperties, "cuFileDriverGetProperties", m);
  lib.Resolve(a.HandleRegister, "cuFileHandleRegister", m);
  lib.Resolve(a.HandleDeregister, "cuFileHandleDeregister", m);
  lib.Resolve(a.Read, "cuFileRead", m);
  lib.Resolve(a.Write, "cuFileWrite", m);
  lib.Resolve(a.GetVersion, "cuFileGetVersion", nullptr);
  lib.Resolve(a.SetStatsLevel, "cuFileSetStatsLevel", nullptr);
  lib.Resolve(a.StatsStart, "cuFileStatsStart", nullptr);
  lib.Resolve(a.GetStatsL3, "cuFileGetStatsL3", nullptr);
  if (!DlLibrary::Finish(g_state, a.DriverOpen, "cuFile")) return g_state;
  if (a.GetVersion) a.GetVersion(&g_state.version);
  return g_state;
}

const CuFileState& CuFileStatus() { return g_state; }

CuFileState CuFileStatusSnapshot() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_state;
}
const CuFileApi& CuFile() { return g_api; }

bool ReadCuFileStatsL3(CuFileStatsL3* block) {
  if (!g_api.GetStatsL3) return false;
  *block = CuFileStatsL3{};
  return g_api.GetStatsL3(block).err == kCuFileSuccess;
}

namespace {

// Level-3 statistics on, when this cuFile has them; the outcome in `statsLevel` and `statsError`.
void EnableStats(int* statsLevel, std::string* statsError) {
  const CuFileApi& cf = g_api;
  if (!cf.SetStatsLevel || !cf.StatsStart || !cf.GetStatsL3) {
    *statsError = "this cuFile has no statistics API (cuFile 1.15 or later has it)";
    return;
  }
  CUfileError_t r = cf.SetStatsLevel(3);
  if (r.err == kCuFileSuccess) r = cf.StatsStart();
  CuFileStatsL3 probe;
  if (r.err == kCuFileSuccess && ReadCuFileStatsL3(&probe)) {
    *statsLevel = 3;
    statsError->clear();
  } else {
    *statsError = "cuFile refused level-3 statistics (" + CuFileErrorName(r.err) + ")";
  }
}

}  // namespace

CuFileState OpenCuFileDriver() {
  std::unique_lock<std::mutex> lock(g_mutex);
  g_opened.wait(lock, [] { return !g_state.driverOpening; });
  if (!g_state.loaded || g_state.driverAttempted) return g_state;
  g_state.driverOpening = true;
  int statsLevel = g_state.statsLevel;
  std::string statsError = g_state.statsError;
  lock.unlock();
  EnableStats(&statsLevel, &statsError);  // settings must precede the driver open
  CUfileError_t result = g_api.DriverOpen();
  // Already open means another library in this process opened it: usable all the same.
  bool open = result.err == kCuFileSuccess || result.err == kCuFileDriverAlreadyOpen;
  CUfileDrvProps_t props{};
  bool haveProps = false;
  if (open) {
    if (statsLevel < 3) EnableStats(&statsLevel, &statsError);
    haveProps = g_api.DriverGetProperties(&props).err == kCuFileSuccess;
  }
  lock.lock();
  CuFileState& s = g_state;
  s.driverAttempted = true;
  s.driverOpening = false;
  s.driverResult = result;
  s.driverOpen = open;
  s.statsLevel = statsLevel;
  s.statsError = statsError;
  s.props = props;
  s.haveProps = haveProps;
  g_opened.notify_all();
  return s;
}

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
