// cuFile (GPUDirect Storage) types and entry points, declared from the documented x86-64 layouts
// and resolved at run time. Optional entry points (statistics) may be absent in older releases.
#pragma once
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace penstock {

struct CUfileError_t {
  int err;
  int cu_err;
};
static_assert(sizeof(CUfileError_t) == 8, "CUfileError_t is returned by value in two ints");

struct CUfileDescr_t {
  int type;  // 1 = CU_FILE_HANDLE_TYPE_OPAQUE_FD
  union {
    int fd;
    void* handle;
  } handle;  // pointer-sized, so fd sits at offset 8
  const void* fs_ops;
};
static_assert(sizeof(CUfileDescr_t) == 24, "CUfileDescr_t layout");

struct CUfileDrvProps_t {
  uint32_t nvfs_major;
  uint32_t nvfs_minor;
  size_t poll_thresh_size_kb;
  size_t max_direct_io_size_kb;
  uint32_t dstatusflags;
  uint32_t dcontrolflags;
  uint32_t fflags;
  uint32_t max_device_cache_size;
  uint32_t per_buffer_cache_size;
  uint32_t max_device_pinned_mem_size;
  uint32_t max_batch_io_size;
  uint32_t max_batch_io_timeout_msecs;
};
static_assert(sizeof(CUfileDrvProps_t) == 56, "CUfileDrvProps_t layout");
static_assert(offsetof(CUfileDrvProps_t, dstatusflags) == 24, "dstatusflags offset");

using CUfileHandle_t = void*;
constexpr int kCuFileSuccess = 0;
constexpr int kCuFileBase = 5000;

// Level-3 statistics: an opaque 5000-byte block read at fixed offsets.
constexpr size_t kStatsL3Size = 5000;
constexpr size_t kStatsL3NumGpus = 1024;
constexpr size_t kStatsL3PerGpu = 1032;
constexpr size_t kStatsL3GpuStride = 248;
constexpr size_t kStatsL3MaxGpus = 16;

struct CuFileApi {
  CUfileError_t (*DriverOpen)() = nullptr;
  CUfileError_t (*DriverClose)() = nullptr;
  CUfileError_t (*DriverGetProperties)(CUfileDrvProps_t*) = nullptr;
  CUfileError_t (*HandleRegister)(CUfileHandle_t*, CUfileDescr_t*) = nullptr;
  void (*HandleDeregister)(CUfileHandle_t) = nullptr;
  ssize_t (*Read)(CUfileHandle_t, void*, size_t, off_t, off_t) = nullptr;
  ssize_t (*Write)(CUfileHandle_t, const void*, size_t, off_t, off_t) = nullptr;
  // Optional.
  CUfileError_t (*GetVersion)(int*) = nullptr;
  CUfileError_t (*SetStatsLevel)(int) = nullptr;
  CUfileError_t (*StatsStart)() = nullptr;
  CUfileError_t (*GetStatsL3)(void*) = nullptr;
  CUfileError_t (*GetBARSizeInKB)(int, size_t*) = nullptr;
};

struct CuFileState {
  bool attempted = false;
  bool loaded = false;
  std::string path;
  std::string resolvedPath;
  std::string loadError;
  std::string missing;
  int version = 0;
  bool driverAttempted = false;
  bool driverOpen = false;
  CUfileError_t driverResult{0, 0};
  CUfileDrvProps_t props{};
  bool haveProps = false;
  int statsLevel = 0;
  std::string statsError;
};

const CuFileState& LoadCuFile(const std::string& path);
const CuFileState& CuFileStatus();
CuFileState& MutableCuFileStatus();
const CuFileApi& CuFile();

// Interprets cuFileRead/Write's return value: both conventions seen in the wild (a negative cuFile
// code, or -1 with errno holding an OS error or a cuFile code) map to {isCuFile, code}.
struct IoFailure {
  bool cufile;
  int code;
};
IoFailure DecodeCuFileIoError(ssize_t ret, int savedErrno);

}  // namespace penstock
