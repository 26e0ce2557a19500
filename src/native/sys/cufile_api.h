// cuFile (GPUDirect Storage) types and entry points, declared from the documented x86-64 layouts
// and resolved at run time. Optional entry points (statistics) may be absent in older releases.
#pragma once
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "sys/dl_library.h"

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
constexpr int kCuFileDriverAlreadyOpen = 5026;

// Level-3 statistics (cuFileGetStatsL3): a 5000-byte block whose per-GPU entries hold the counters
// `gds_stats -l 3` prints. Only the fields read are named; the rest is kept opaque at its size.
struct CuFileGpuStatsL3 {
  unsigned char reserved0[48];
  uint64_t n_total_reads;
  uint64_t n_p2p_reads;
  uint64_t n_nvfs_reads;
  uint64_t n_posix_reads;
  uint64_t n_unaligned_reads;
  unsigned char reserved1[24];
  uint64_t n_reads_err;
  unsigned char reserved2[48];
  uint64_t n_nvfs_writes;
  uint64_t n_posix_writes;
  unsigned char reserved3[56];
  uint64_t reg_bytes;
};
static_assert(sizeof(CuFileGpuStatsL3) == 248, "per-GPU level-3 entry size");
static_assert(offsetof(CuFileGpuStatsL3, n_total_reads) == 48, "n_total_reads offset");
static_assert(offsetof(CuFileGpuStatsL3, n_p2p_reads) == 56, "n_p2p_reads offset");
static_assert(offsetof(CuFileGpuStatsL3, n_nvfs_reads) == 64, "n_nvfs_reads offset");
static_assert(offsetof(CuFileGpuStatsL3, n_posix_reads) == 72, "n_posix_reads offset");
static_assert(offsetof(CuFileGpuStatsL3, n_unaligned_reads) == 80, "n_unaligned_reads offset");
static_assert(offsetof(CuFileGpuStatsL3, n_reads_err) == 112, "n_reads_err offset");
static_assert(offsetof(CuFileGpuStatsL3, n_nvfs_writes) == 168, "n_nvfs_writes offset");
static_assert(offsetof(CuFileGpuStatsL3, n_posix_writes) == 176, "n_posix_writes offset");
static_assert(offsetof(CuFileGpuStatsL3, reg_bytes) == 240, "reg_bytes offset");

constexpr size_t kStatsL3MaxGpus = 16;
struct CuFileStatsL3 {
  unsigned char reserved0[1024];  // the level-1 and level-2 counters
  uint32_t num_gpus;
  uint32_t reserved1;
  CuFileGpuStatsL3 per_gpu_stats[kStatsL3MaxGpus];
};
static_assert(sizeof(CuFileStatsL3) == 5000, "level-3 statistics block size");
static_assert(offsetof(CuFileStatsL3, num_gpus) == 1024, "num_gpus offset");
static_assert(offsetof(CuFileStatsL3, per_gpu_stats) == 1032, "per_gpu_stats offset");

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
  CUfileError_t (*GetStatsL3)(CuFileStatsL3*) = nullptr;
};

struct CuFileState : LibraryState {
  int version = 0;
  bool driverOpening = false;  // an open is under way on some thread
  bool driverAttempted = false;
  bool driverOpen = false;
  CUfileError_t driverResult{0, 0};
  CUfileDrvProps_t props{};
  bool haveProps = false;
  int statsLevel = 0;
  std::string statsError;
};

const CuFileState& LoadCuFile(const std::string& path);
// For worker paths, once a handle exists (the state no longer changes then).
const CuFileState& CuFileStatus();
// A copy taken under the state's lock: safe while another thread opens the driver.
CuFileState CuFileStatusSnapshot();
const CuFileApi& CuFile();

// Switches on level-3 statistics and opens the driver, once per process; the caller makes the GPU's
// context current first. Later calls return the first outcome; a call while another thread opens
// it waits for that open. The open itself (hundreds of milliseconds) holds no lock that status
// readers take.
CuFileState OpenCuFileDriver();

// The current level-3 block, or false when statistics are off or cuFile refuses them.
bool ReadCuFileStatsL3(CuFileStatsL3* block);

// Interprets cuFileRead/Write's return value: both conventions seen in the wild (a negative cuFile
// code, or -1 with errno holding an OS error or a cuFile code) map to {isCuFile, code}.
struct IoFailure {
  bool cufile;
  int code;
};
IoFailure DecodeCuFileIoError(ssize_t ret, int savedErrno);

}  // namespace penstock
