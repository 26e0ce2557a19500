/*
 * Test-only fake of libcuda.so.1, memory part: device memory is host memory (a shared mapping
 * of a memfd, so that fake_ipc.c can hand it to another process), recorded in one table with
 * pinned host memory so that cuPointerGetAttribute, cuMemGetAddressRange and the fake cuFile
 * (through fake_cuda_lookup) can tell what a pointer is.
 */
#define _GNU_SOURCE
#include "fake_internal.h"
#include <fcntl.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* A linked list: records must not move, because in-flight copies hold pointers to them. */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_unbusy = PTHREAD_COND_INITIALIZER;
static fake_rec *g_recs;
static unsigned long long g_used[MAX_DEVICES];
static long long g_pinned_bytes;
static long long g_live_device;
static atomic_llong g_copies;

/* ---- allocation table (callers hold g_mu) -------------------------------------------------- */

static fake_rec *find_containing(uintptr_t p, size_t n, int device_only) {
  for (fake_rec *r = g_recs; r; r = r->next) {
    if (r->dying || (device_only && r->kind != REC_DEVICE)) continue;
    /* Written so that p + n cannot overflow. */
    if (p >= r->base && p - r->base < r->size && n <= r->size - (p - r->base)) return r;
  }
  return NULL;
}

static fake_rec *find_base(uintptr_t p, enum rec_kind kind) {
  for (fake_rec *r = g_recs; r; r = r->next)
    if (!r->dying && r->kind == kind && r->base == p) return r;
  return NULL;
}

/* Waits out in-flight copies (the real driver's frees synchronise too), then unlinks. */
static void retire(fake_rec *rec) {
  rec->dying = 1;
  while (rec->busy) pthread_cond_wait(&g_unbusy, &g_mu);
  for (fake_rec **pp = &g_recs; *pp; pp = &(*pp)->next)
    if (*pp == rec) {
      *pp = rec->next;
      break;
    }
}

static void add_rec(fake_rec *rec) {
  rec->next = g_recs;
  g_recs = rec;
}

void fk_table_lock(void) { pthread_mutex_lock(&g_mu); }
void fk_table_unlock(void) { pthread_mutex_unlock(&g_mu); }
fake_rec *fk_table_head(void) { return g_recs; }
void fk_table_add(fake_rec *rec) { add_rec(rec); }
void fk_table_retire(fake_rec *rec) { retire(rec); }

int fk_acquire_device_range(CUdeviceptr p, size_t n, fake_rec **out) {
  pthread_mutex_lock(&g_mu);
  fake_rec *r = find_containing((uintptr_t)p, n, 1);
  if (r) r->busy++;
  pthread_mutex_unlock(&g_mu);
  *out = r;
  return r == NULL;
}

fake_rec *fk_acquire_host(const void *p) {
  pthread_mutex_lock(&g_mu);
  fake_rec *r = find_containing((uintptr_t)p, 1, 0);
  if (r && r->kind == REC_DEVICE) r = NULL;
  if (r) r->busy++;
  pthread_mutex_unlock(&g_mu);
  return r;
}

void fk_release(fake_rec *rec) {
  if (!rec) return;
  pthread_mutex_lock(&g_mu);
  if (--rec->busy == 0) pthread_cond_broadcast(&g_unbusy);
  pthread_mutex_unlock(&g_mu);
}

/*
 * FAKE_CUDA_FAIL_COPY_AFTER=N[:tag]. JavaScript tests cannot reach fake_cuda_reset_counters, so
 * the count also restarts whenever the variable's value changes; the optional ":tag" lets two
 * tests in a row use the same N and still start from zero.
 */
static fake_inject g_inject = FAKE_INJECT_INIT;

int fk_copy_should_fail(void) {
  atomic_fetch_add(&g_copies, 1);
  return fake_inject_should_fail(&g_inject, "FAKE_CUDA_FAIL_COPY_AFTER");
}


/* ---- device memory ------------------------------------------------------------------------- */

FAKE_API CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t size) {
  int dev;
  CUresult r = fk_check_ctx(&dev);
  if (r) return r;
  if (!dptr || !size) return CUDA_ERROR_INVALID_VALUE;
  unsigned long long limit = fk_mem_limit();
  /* Reserve first so that concurrent allocations cannot overshoot the limit together. */
  pthread_mutex_lock(&g_mu);
  int fits = size <= limit && g_used[dev] <= limit - size;
  if (fits) g_used[dev] += size;
  pthread_mutex_unlock(&g_mu);
  if (!fits) return CUDA_ERROR_OUT_OF_MEMORY;
  fake_rec *rec = calloc(1, sizeof *rec);
  /* The memfd's name carries this process's id, so a test can find the mappings of another
     process's memory in its own /proc/self/maps. */
  char name[48];
  snprintf(name, sizeof name, "fake-cuda-device-%d", (int)getpid());
  int fd = rec ? memfd_create(name, MFD_CLOEXEC) : -1;
  void *p = MAP_FAILED;
  if (fd >= 0 && ftruncate(fd, (off_t)size) == 0)
    p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    if (fd >= 0) close(fd);
    free(rec);
    pthread_mutex_lock(&g_mu);
    g_used[dev] -= size;
    pthread_mutex_unlock(&g_mu);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  /* Recognisable garbage, so tests notice bytes the library never wrote. */
  memset(p, 0xA5, size);
  *rec = (fake_rec){.base = (uintptr_t)p, .size = size, .kind = REC_DEVICE, .device = dev, .fd = fd};
  pthread_mutex_lock(&g_mu);
  add_rec(rec);
  g_live_device++;
  pthread_mutex_unlock(&g_mu);
  *dptr = (CUdeviceptr)(uintptr_t)p;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemFree_v2(CUdeviceptr dptr) {
  CUresult r = fk_check_init();
  if (r) return r;
  pthread_mutex_lock(&g_mu);
  fake_rec *rec = find_base((uintptr_t)dptr, REC_DEVICE);
  /* Memory opened with cuIpcOpenMemHandle is released with cuIpcCloseMemHandle only. */
  if (!rec || rec->imported) {
    pthread_mutex_unlock(&g_mu);
    return CUDA_ERROR_INVALID_VALUE;
  }
  retire(rec);
  g_used[rec->device] -= rec->size;
  g_live_device--;
  pthread_mutex_unlock(&g_mu);
  munmap((void *)rec->base, rec->size);
  close(rec->fd);
  free(rec);
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes) {
  int dev;
  CUresult r = fk_check_ctx(&dev);
  if (r) return r;
  if (!free_bytes || !total_bytes) return CUDA_ERROR_INVALID_VALUE;
  unsigned long long limit = fk_mem_limit();
  pthread_mutex_lock(&g_mu);
  unsigned long long used = g_used[dev];
  pthread_mutex_unlock(&g_mu);
  *total_bytes = (size_t)limit;
  *free_bytes = used >= limit ? 0 : (size_t)(limit - used);
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemGetAddressRange_v2(CUdeviceptr *base, size_t *size, CUdeviceptr p) {
  CUresult r = fk_check_init();
  if (r) return r;
  pthread_mutex_lock(&g_mu);
  fake_rec *rec = find_containing((uintptr_t)p, 1, 1);
  if (rec) {
    if (base) *base = rec->base;
    if (size) *size = rec->size;
  }
  pthread_mutex_unlock(&g_mu);
  return rec ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* ---- pinned host memory -------------------------------------------------------------------- */

/* FAKE_CUDA_PIN_LOG names a file that gets a line per cuMemHostAlloc and cuMemHostRegister call
 * ("<call> <bytes>", and the address for a registration), appended across processes, so tests can see which way memory was pinned. */
static void note_pin(const char *call, size_t size, const void *at) {
  const char *log = getenv("FAKE_CUDA_PIN_LOG");
  if (!log || !*log) return;
  char line[96];
  int n = at ? snprintf(line, sizeof line, "%s %zu %p\n", call, size, at) : snprintf(line, sizeof line, "%s %zu\n", call, size);
  int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) return;
  ssize_t w = write(fd, line, (size_t)n);
  (void)w;
  close(fd);
}

FAKE_API CUresult cuMemHostAlloc(void **pp, size_t size, unsigned flags) {
  (void)flags;
  note_pin("cuMemHostAlloc", size, NULL);
  CUresult r = fk_check_ctx(NULL);
  if (r) return r;
  if (!pp || !size) return CUDA_ERROR_INVALID_VALUE;
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  size_t span = (size + page - 1) / page * page;
  void *p = NULL;
  fake_rec *rec = calloc(1, sizeof *rec);
  if (!rec) return CUDA_ERROR_OUT_OF_MEMORY;
  if (fk_pinned_unmap()) {
    /* Its own mapping, unmapped by cuMemFreeHost: a write after the free faults at once. */
    p = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) p = NULL;
  } else if (posix_memalign(&p, page, span)) {
    p = NULL;
  }
  if (!p) {
    free(rec);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *rec = (fake_rec){.base = (uintptr_t)p, .size = size, .kind = REC_HOST_ALLOC, .mapped = fk_pinned_unmap()};
  pthread_mutex_lock(&g_mu);
  add_rec(rec);
  g_pinned_bytes += (long long)size;
  pthread_mutex_unlock(&g_mu);
  *pp = p;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemFreeHost(void *p) {
  CUresult r = fk_check_init();
  if (r) return r;
  pthread_mutex_lock(&g_mu);
  fake_rec *rec = find_base((uintptr_t)p, REC_HOST_ALLOC);
  if (!rec) {
    pthread_mutex_unlock(&g_mu);
    return CUDA_ERROR_INVALID_VALUE;
  }
  retire(rec);
  g_pinned_bytes -= (long long)rec->size;
  pthread_mutex_unlock(&g_mu);
  if (rec->mapped) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    munmap(p, (rec->size + page - 1) / page * page);
  } else {
    free(p);
  }
  free(rec);
  return CUDA_SUCCESS;
}

/*
 * FAKE_CUDA_HOST_REGISTER_FAIL=1 refuses every registration (CUDA_ERROR_NOT_SUPPORTED), as a
 * driver without read-only registration would; FAKE_CUDA_HOST_REGISTER_DELAY_US=N makes each
 * take N microseconds, like the real driver's page pinning.
 */
FAKE_API CUresult cuMemHostRegister_v2(void *p, size_t size, unsigned flags) {
  note_pin("cuMemHostRegister", size, p);
  CUresult r = fk_check_ctx(NULL);
  if (r) return r;
  /* PORTABLE, DEVICEMAP, IOMEMORY and READ_ONLY are all the flags there are. */
  if (!p || !size || (flags & ~0xfu)) return CUDA_ERROR_INVALID_VALUE;
  if (fake_env_ll("FAKE_CUDA_HOST_REGISTER_FAIL", 0)) return CUDA_ERROR_NOT_SUPPORTED;
  long long delay = fake_env_ll("FAKE_CUDA_HOST_REGISTER_DELAY_US", 0);
  if (delay > 0) usleep((useconds_t)delay);
  /* The real driver pins every page now: an address that is not mapped (or a mapping past the
     end of its file) fails here, never later. */
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  if ((uintptr_t)p % page || size % page) return CUDA_ERROR_INVALID_VALUE;
  for (size_t off = 0; off < size; off += page) {
    unsigned char v;
    if (mincore((char *)p + off, page, &v) != 0) return CUDA_ERROR_INVALID_VALUE;
  }
  fake_rec *rec = calloc(1, sizeof *rec);
  if (!rec) return CUDA_ERROR_OUT_OF_MEMORY;
  *rec = (fake_rec){.base = (uintptr_t)p, .size = size, .kind = REC_HOST_REG};
  pthread_mutex_lock(&g_mu);
  for (fake_rec *o = g_recs; o; o = o->next) {
    if (o->dying || !(rec->base < o->base + o->size && o->base < rec->base + size)) continue;
    /* Registering "device" memory as host memory would be a library bug: the real driver refuses. */
    r = o->kind == REC_DEVICE ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
    break;
  }
  if (!r) {
    add_rec(rec);
    g_pinned_bytes += (long long)size;
  }
  pthread_mutex_unlock(&g_mu);
  if (r) free(rec);
  return r;
}

FAKE_API CUresult cuMemHostUnregister(void *p) {
  CUresult r = fk_check_init();
  if (r) return r;
  pthread_mutex_lock(&g_mu);
  fake_rec *rec = find_base((uintptr_t)p, REC_HOST_REG);
  if (!rec) {
    pthread_mutex_unlock(&g_mu);
    return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
  }
  /* A copy still reading the range would read unpinned memory on real hardware: a caller bug
     the fake reports instead of hiding it by waiting. */
  if (rec->busy) {
    pthread_mutex_unlock(&g_mu);
    return CUDA_ERROR_ILLEGAL_ADDRESS;
  }
  retire(rec);
  g_pinned_bytes -= (long long)rec->size;
  pthread_mutex_unlock(&g_mu);
  free(rec);
  return CUDA_SUCCESS;
}

/* ---- pointer attributes -------------------------------------------------------------------- */

enum {
  ATTR_CONTEXT = 1,
  ATTR_MEMORY_TYPE = 2,
  ATTR_DEVICE_POINTER = 3,
  ATTR_HOST_POINTER = 4,
  ATTR_DEVICE_ORDINAL = 9,
  ATTR_IS_LEGACY_CUDA_IPC_CAPABLE = 10,
  ATTR_RANGE_START_ADDR = 11,
  ATTR_RANGE_SIZE = 12,
  ATTR_MEMPOOL_HANDLE = 17,
};
enum { MEMORYTYPE_HOST = 1, MEMORYTYPE_DEVICE = 2 };

FAKE_API CUresult cuPointerGetAttribute(void *data, int attribute, CUdeviceptr ptr) {
  CUresult r = fk_check_init();
  if (r) return r;
  if (!data) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&g_mu);
  fake_rec *rec = find_containing((uintptr_t)ptr, 1, 0);
  fake_rec copy = rec ? *rec : (fake_rec){0};
  pthread_mutex_unlock(&g_mu);
  if (!rec) return CUDA_ERROR_INVALID_VALUE;
  int on_device = copy.kind == REC_DEVICE;
  switch (attribute) {
    case ATTR_CONTEXT: *(CUcontext *)data = fk_device_ctx(copy.device); break;
    case ATTR_MEMORY_TYPE: *(unsigned *)data = on_device ? MEMORYTYPE_DEVICE : MEMORYTYPE_HOST; break;
    case ATTR_DEVICE_POINTER: *(CUdeviceptr *)data = ptr; break;
    case ATTR_HOST_POINTER:
      if (on_device) return CUDA_ERROR_INVALID_VALUE;
      *(void **)data = (void *)(uintptr_t)ptr;
      break;
    case ATTR_DEVICE_ORDINAL: *(int *)data = copy.device; break;
    case ATTR_RANGE_START_ADDR: *(CUdeviceptr *)data = copy.base; break;
    case ATTR_RANGE_SIZE: *(size_t *)data = copy.size; break;
    /* FAKE_CUDA_IPC_UNSUPPORTED=1 makes every allocation one that IPC refuses (as pool or VMM
       memory would be); imported memory cannot be exported again. */
    case ATTR_IS_LEGACY_CUDA_IPC_CAPABLE:
      *(int *)data = on_device && !copy.imported && !fake_env_ll("FAKE_CUDA_IPC_UNSUPPORTED", 0);
      break;
    case ATTR_MEMPOOL_HANDLE: *(void **)data = NULL; break;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

/* ---- synchronous copies -------------------------------------------------------------------- */

static CUresult sync_copy(void *dst, const void *src, size_t n, CUdeviceptr device_side) {
  CUresult r = fk_check_ctx(NULL);
  if (r) return r;
  if (!n) return CUDA_SUCCESS;
  if (!dst || !src) return CUDA_ERROR_INVALID_VALUE;
  fake_rec *rec;
  if (fk_acquire_device_range(device_side, n, &rec)) return CUDA_ERROR_INVALID_VALUE;
  fk_legacy_sync();
  if (fk_copy_should_fail()) r = CUDA_ERROR_ILLEGAL_ADDRESS;
  else memcpy(dst, src, n);
  fk_release(rec);
  return r;
}

FAKE_API CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n) {
  return sync_copy((void *)(uintptr_t)dst, src, n, dst);
}

FAKE_API CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n) {
  return sync_copy(dst, (const void *)(uintptr_t)src, n, src);
}

FAKE_API CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char value, size_t n) {
  CUresult r = fk_check_ctx(NULL);
  if (r) return r;
  if (!n) return CUDA_SUCCESS;
  fake_rec *rec;
  if (fk_acquire_device_range(dst, n, &rec)) return CUDA_ERROR_INVALID_VALUE;
  fk_legacy_sync();
  memset((void *)(uintptr_t)dst, value, n);
  fk_release(rec);
  return CUDA_SUCCESS;
}

/* ---- fake-only exports --------------------------------------------------------------------- */

FAKE_API int fake_cuda_lookup(const void *p, void **base, size_t *size, int *device) {
  pthread_mutex_lock(&g_mu);
  fake_rec *rec = find_containing((uintptr_t)p, 1, 1);
  if (rec) {
    if (base) *base = (void *)rec->base;
    if (size) *size = rec->size;
    if (device) *device = rec->device;
  }
  pthread_mutex_unlock(&g_mu);
  return rec != NULL;
}

FAKE_API void fake_cuda_reset_counters(void) {
  atomic_store(&g_copies, 0);
  fake_inject_reset(&g_inject);
}

FAKE_API long long fake_cuda_copy_count(void) { return atomic_load(&g_copies); }

FAKE_API long long fake_cuda_pinned_bytes(void) {
  pthread_mutex_lock(&g_mu);
  long long v = g_pinned_bytes;
  pthread_mutex_unlock(&g_mu);
  return v;
}

FAKE_API long long fake_cuda_live_allocations(void) {
  pthread_mutex_lock(&g_mu);
  long long v = g_live_device;
  pthread_mutex_unlock(&g_mu);
  return v;
}
