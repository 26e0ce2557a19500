/*
 * Test-only fake of libcufile.so.0: declarations shared by fake_cufile.c and fake_cufile_stats.c.
 * Layouts are written from cuFile's documented x86-64 ABI (no NVIDIA header is used); the static
 * assertions pin every offset the addon reads.
 */
#ifndef PENSTOCK_FAKE_CUFILE_H
#define PENSTOCK_FAKE_CUFILE_H

#include <stddef.h>
#include <stdint.h>

#include "fake_switches.h"

#define FAKE_API __attribute__((visibility("default")))
#define FAKE_MAX_GPUS 16

/* Returned by value: 8 bytes, so it comes back in a register, as with the real library. */
typedef struct {
  int err;
  int cu_err;
} CUfileError_t;

enum {
  CU_FILE_SUCCESS = 0,
  CU_FILE_DRIVER_NOT_INITIALIZED = 5001,
  CU_FILE_CUDA_DRIVER_ERROR = 5011,
  CU_FILE_CUDA_POINTER_INVALID = 5012,
  CU_FILE_INVALID_FILE_TYPE = 5018,
  CU_FILE_INVALID_VALUE = 5022,
  CU_FILE_MEMORY_ALREADY_REGISTERED = 5023,
  CU_FILE_MEMORY_NOT_REGISTERED = 5024,
  CU_FILE_DRIVER_ALREADY_OPEN = 5026,
  CU_FILE_HANDLE_NOT_REGISTERED = 5027,
  CU_FILE_INTERNAL_ERROR = 5030,
  CU_FILE_IO_ERROR = 5044,
};

enum { CU_FILE_HANDLE_TYPE_OPAQUE_FD = 1 };

typedef struct {
  int type;
  union {
    int fd;
    void *handle;
  } handle;
  const void *fs_ops;
} CUfileDescr_t;

typedef void *CUfileHandle_t;

typedef struct {
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
} CUfileDrvProps_t;

_Static_assert(sizeof(CUfileError_t) == 8, "CUfileError_t");
_Static_assert(sizeof(CUfileDescr_t) == 24, "CUfileDescr_t");
_Static_assert(offsetof(CUfileDescr_t, handle) == 8, "CUfileDescr_t.handle");
_Static_assert(offsetof(CUfileDescr_t, fs_ops) == 16, "CUfileDescr_t.fs_ops");
_Static_assert(sizeof(CUfileDrvProps_t) == 56, "CUfileDrvProps_t");
_Static_assert(offsetof(CUfileDrvProps_t, poll_thresh_size_kb) == 8, "poll_thresh_size_kb");
_Static_assert(offsetof(CUfileDrvProps_t, max_direct_io_size_kb) == 16, "max_direct_io_size_kb");
_Static_assert(offsetof(CUfileDrvProps_t, dstatusflags) == 24, "dstatusflags");
_Static_assert(offsetof(CUfileDrvProps_t, dcontrolflags) == 28, "dcontrolflags");
_Static_assert(offsetof(CUfileDrvProps_t, fflags) == 32, "fflags");
_Static_assert(offsetof(CUfileDrvProps_t, max_device_cache_size) == 36, "max_device_cache_size");
_Static_assert(offsetof(CUfileDrvProps_t, per_buffer_cache_size) == 40, "per_buffer_cache_size");
_Static_assert(offsetof(CUfileDrvProps_t, max_device_pinned_mem_size) == 44, "max_device_pinned_mem_size");
_Static_assert(offsetof(CUfileDrvProps_t, max_batch_io_size) == 48, "max_batch_io_size");
_Static_assert(offsetof(CUfileDrvProps_t, max_batch_io_timeout_msecs) == 52, "max_batch_io_timeout_msecs");

/* Provided by the fake libcuda.so.1 (DT_NEEDED), so both libraries share one allocation table. */
int cuCtxGetCurrent(void **ctx);
int cuDeviceGetCount(int *count);
int fake_cuda_lookup(const void *p, void **base, size_t *size, int *device);


static inline CUfileError_t fcf_status(int err, int cu_err) {
  CUfileError_t e = {err, cu_err};
  return e;
}

/* Accounts one finished cuFileRead/cuFileWrite in the level-3 counters of its GPU. */
void fcf_stats_io(int device, int write, int ok, size_t bytes, int unaligned);

/* Tracks cuFileBufRegister bytes per GPU (reg_bytes): a state, not a counter, so never reset. */
void fcf_stats_registered(int device, long long delta);

#endif
