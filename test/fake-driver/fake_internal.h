/*
 * Test-only fake of the CUDA driver: declarations shared by its source files (fake_cuda.c,
 * fake_memory.c, fake_stream.c, fake_event.c).
 * Every type here is declared from the driver's documented ABI, not taken from NVIDIA's headers
 * (none exist on CI machines). Nothing in this header is exported from the library: the build
 * uses -fvisibility=hidden and only FAKE_API functions are visible to dlsym.
 */
#ifndef PENSTOCK_FAKE_INTERNAL_H
#define PENSTOCK_FAKE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "fake_switches.h"

#define FAKE_API __attribute__((visibility("default")))

#define MAX_DEVICES 16

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct fake_ctx *CUcontext;
typedef struct fake_stream *CUstream;
typedef struct fake_event *CUevent;

enum {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_INVALID_VALUE = 1,
  CUDA_ERROR_OUT_OF_MEMORY = 2,
  CUDA_ERROR_NOT_INITIALIZED = 3,
  CUDA_ERROR_NO_DEVICE = 100,
  CUDA_ERROR_INVALID_DEVICE = 101,
  CUDA_ERROR_INVALID_CONTEXT = 201,
  CUDA_ERROR_INVALID_HANDLE = 400,
  CUDA_ERROR_NOT_READY = 600,
  CUDA_ERROR_ILLEGAL_ADDRESS = 700,
  CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED = 712,
  CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED = 713,
  CUDA_ERROR_NOT_SUPPORTED = 801,
  CUDA_ERROR_UNKNOWN = 999,
};

/* One entry of the allocation table (device memory, cuMemHostAlloc memory, registered ranges). */
typedef struct fake_rec fake_rec;

enum rec_kind { REC_DEVICE, REC_HOST_ALLOC, REC_HOST_REG };

struct fake_rec {
  struct fake_rec *next;
  uintptr_t base;
  size_t size;
  enum rec_kind kind;
  int device;
  int busy;  /* copies in flight that touch this range */
  int dying; /* being freed: invisible to lookups while the free waits for busy == 0 */
  int mapped; /* cuMemHostAlloc memory of its own mapping (FAKE_CUDA_PINNED_UNMAP) */
  /* Device memory is a shared mapping of a memfd, so another process can map the same pages
     (CUDA IPC). `fd` stays open while the allocation lives; -1 for imported mappings. */
  int fd;
  /* Imported through cuIpcOpenMemHandle: the exporter's memfd identity and the open count. */
  int imported;
  int ipc_refs;
  unsigned long long ipc_dev, ipc_ino;
};

/* The allocation table, for fake_ipc.c: lock, insert, and unlink after in-flight copies end. */
void fk_table_lock(void);
void fk_table_unlock(void);
fake_rec *fk_table_head(void); /* caller holds the lock */
void fk_table_add(fake_rec *rec);    /* caller holds the lock */
void fk_table_retire(fake_rec *rec); /* caller holds the lock; may wait for copies */

/* FAKE_CUDA_VISIBLE_DEVICES (like CUDA_VISIBLE_DEVICES): the physical GPU behind an ordinal,
   which gives its PCI bus id. Without the variable, ordinal n is physical GPU n. */
int fk_physical_device(int ordinal);
/* The ordinal of a physical GPU in this process, or -1 when it is not visible. */
int fk_ordinal_of_physical(int physical);

/* Integer environment switch, read on every call because tests flip them through process.env. */

/* FAKE_CUDA_DEVICE_COUNT, clamped to 0..MAX_DEVICES. */
int fk_device_count(void);
int fk_valid_device(int device);

/* FAKE_CUDA_PINNED_UNMAP: cuMemHostAlloc memory is a mapping of its own, unmapped when freed. */
int fk_pinned_unmap(void);

/* FAKE_CUDA_MEM_LIMIT: the per-device capacity, reported as total memory too. */
unsigned long long fk_mem_limit(void);

/* The primary context object of a device (valid for any ordinal below MAX_DEVICES). */
CUcontext fk_device_ctx(int device);

/* CUDA_ERROR_NOT_INITIALIZED until cuInit has succeeded. */
CUresult fk_check_init(void);

/* Initialised, and the calling thread has a current context whose primary context is retained. */
CUresult fk_check_ctx(int *device);

/*
 * Pins the live device allocation that holds all of [p, p+n) so that cuMemFree waits for the
 * copy instead of freeing memory a stream worker is about to touch. Nonzero if there is none.
 */
int fk_acquire_device_range(CUdeviceptr p, size_t n, fake_rec **rec);

/* Same for a pinned host range containing p, if any (NULL otherwise: pageable memory). */
fake_rec *fk_acquire_host(const void *p);

void fk_release(fake_rec *rec);

/* Waits for the default stream and every blocking stream (legacy default stream ordering). */
void fk_legacy_sync(void);

/* Counts one copy; nonzero when FAKE_CUDA_FAIL_COPY_AFTER says this one must fail. */
int fk_copy_should_fail(void);

#endif
