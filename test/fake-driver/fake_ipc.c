/*
 * Test-only fake of libcuda.so.1, CUDA IPC part. Device memory is a shared mapping of a memfd
 * (fake_memory.c), so a handle names the exporting process and its descriptor:
 * cuIpcOpenMemHandle_v2 in another process opens /proc/<pid>/fd/<fd>, checks that it is still
 * the same file (the allocation may have been freed and the number reused) and maps it, so both
 * processes see the same bytes. Behaviour follows the driver's documentation: a process cannot
 * open its own handle (CUDA_ERROR_INVALID_CONTEXT, what the real driver returns); opening one
 * handle twice in a process returns the same pointer and counts references, each
 * cuIpcCloseMemHandle dropping one. The codes for handles that name nothing (malformed, freed,
 * exporter gone) are the fake's choice: CUDA_ERROR_INVALID_VALUE.
 */
#define _GNU_SOURCE
#include "fake_internal.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

enum { CU_IPC_HANDLE_SIZE = 64, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS = 1 };

typedef struct {
  char reserved[CU_IPC_HANDLE_SIZE];
} CUipcMemHandle;

/* The fake's own layout of the 64 opaque bytes. */
typedef struct {
  char magic[8];
  int32_t pid;
  int32_t fd;
  uint64_t dev;
  uint64_t ino;
  uint64_t size;
  int32_t physical_device;
  int32_t reserved;
} fake_handle;

_Static_assert(sizeof(fake_handle) <= CU_IPC_HANDLE_SIZE, "a fake handle fits in CUipcMemHandle");

static const char k_magic[8] = {'F', 'A', 'K', 'E', 'I', 'P', 'C', '1'};

FAKE_API CUresult cuIpcGetMemHandle(CUipcMemHandle *out, CUdeviceptr p) {
  CUresult r = fk_check_init();
  if (r) return r;
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  if (fake_env_ll("FAKE_CUDA_IPC_UNSUPPORTED", 0)) return CUDA_ERROR_NOT_SUPPORTED;
  fake_handle h = {0};
  int found = 0;
  fk_table_lock();
  for (fake_rec *rec = fk_table_head(); rec; rec = rec->next) {
    /* Like the driver, any address inside an allocation names the whole allocation. */
    if (rec->dying || rec->kind != REC_DEVICE || p < rec->base || p - rec->base >= rec->size) continue;
    if (rec->imported) break; /* memory opened from another process is not exportable */
    struct stat st;
    if (fstat(rec->fd, &st) != 0) break;
    memcpy(h.magic, k_magic, sizeof k_magic);
    h.pid = (int32_t)getpid();
    h.fd = rec->fd;
    h.dev = (uint64_t)st.st_dev;
    h.ino = (uint64_t)st.st_ino;
    h.size = rec->size;
    h.physical_device = fk_physical_device(rec->device);
    found = 1;
    break;
  }
  fk_table_unlock();
  if (!found) return CUDA_ERROR_INVALID_VALUE;
  memset(out, 0, sizeof *out);
  memcpy(out->reserved, &h, sizeof h);
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *out, CUipcMemHandle handle, unsigned flags) {
  int ctx_device;
  CUresult r = fk_check_ctx(&ctx_device);
  if (r) return r;
  /* The driver documents this flag as required. */
  if (!out || flags != CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) return CUDA_ERROR_INVALID_VALUE;
  fake_handle h;
  memcpy(&h, handle.reserved, sizeof h);
  if (memcmp(h.magic, k_magic, sizeof k_magic) != 0 || h.size == 0) return CUDA_ERROR_INVALID_VALUE;
  if (h.pid == (int32_t)getpid()) return CUDA_ERROR_INVALID_CONTEXT;
  /* Memory of another GPU (or one this process cannot see) is reached through peer access. */
  int owner = fk_ordinal_of_physical(h.physical_device);

  fk_table_lock();
  for (fake_rec *rec = fk_table_head(); rec; rec = rec->next) {
    if (rec->dying || !rec->imported || rec->ipc_dev != h.dev || rec->ipc_ino != h.ino) continue;
    rec->ipc_refs++;
    *out = rec->base;
    fk_table_unlock();
    return CUDA_SUCCESS;
  }
  fk_table_unlock();

  char path[64];
  snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)h.pid, (int)h.fd);
  int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) return CUDA_ERROR_INVALID_VALUE;
  struct stat st;
  void *p = MAP_FAILED;
  if (fstat(fd, &st) == 0 && (uint64_t)st.st_dev == h.dev && (uint64_t)st.st_ino == h.ino &&
      (uint64_t)st.st_size == h.size)
    p = mmap(NULL, (size_t)h.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd); /* the mapping keeps the memory; no descriptor is held per import */
  if (p == MAP_FAILED) return CUDA_ERROR_INVALID_VALUE;
  fake_rec *rec = calloc(1, sizeof *rec);
  if (!rec) {
    munmap(p, (size_t)h.size);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *rec = (fake_rec){.base = (uintptr_t)p, .size = (size_t)h.size, .kind = REC_DEVICE,
                    .device = owner >= 0 ? owner : ctx_device, .fd = -1, .imported = 1,
                    .ipc_refs = 1, .ipc_dev = h.dev, .ipc_ino = h.ino};
  fk_table_lock();
  fk_table_add(rec);
  fk_table_unlock();
  *out = (CUdeviceptr)(uintptr_t)p;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuIpcCloseMemHandle(CUdeviceptr p) {
  CUresult r = fk_check_ctx(NULL);
  if (r) return r;
  fk_table_lock();
  fake_rec *rec = fk_table_head();
  for (; rec; rec = rec->next)
    if (!rec->dying && rec->imported && rec->base == p) break;
  if (!rec) {
    fk_table_unlock();
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (--rec->ipc_refs > 0) {
    fk_table_unlock();
    return CUDA_SUCCESS;
  }
  fk_table_retire(rec);
  fk_table_unlock();
  munmap((void *)rec->base, rec->size);
  free(rec);
  return CUDA_SUCCESS;
}
