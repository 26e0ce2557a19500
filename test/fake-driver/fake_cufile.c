/*
 * Test-only fake of libcufile.so.0: driver, handles, buffer registration and cuFileRead/Write.
 * "Device memory" is the fake libcuda's host memory, so reads and writes are plain pread/pwrite
 * into it. Every switch is an environment variable read on each call (README.md lists them).
 * Statistics live in fake_cufile_stats.c.
 */
#define _GNU_SOURCE
#include "fake_cufile.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

typedef struct fake_handle {
  struct fake_handle *next;
  int fd;    /* what the caller registered */
  int io_fd; /* what we read through: see open_io_fd */
} fake_handle;

typedef struct fake_buf {
  struct fake_buf *next;
  const void *ptr;
  size_t len;
  int device;
} fake_buf;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_driver_open;
static fake_handle *g_handles;
static int g_open_handles;
static fake_buf *g_bufs;
static atomic_llong g_io_calls;

/* ---- driver -------------------------------------------------------------------------------- */

FAKE_API CUfileError_t cuFileGetVersion(int *version) {
  if (!version) return fcf_status(CU_FILE_INVALID_VALUE, 0);
  *version = 1150;
  return fcf_status(CU_FILE_SUCCESS, 0);
}

/* FAKE_CUFILE_OPEN_LOG names a file that gets a line per cuFileDriverOpen call (counted across
 * processes); FAKE_CUFILE_DRIVER_OPEN_DELAY_MS makes each call take that long, as the real one
 * takes hundreds of milliseconds. */
static void note_driver_open(void) {
  const char *log = getenv("FAKE_CUFILE_OPEN_LOG");
  if (log && *log) {
    int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd >= 0) {
      ssize_t w = write(fd, "cuFileDriverOpen\n", 17);
      (void)w;
      close(fd);
    }
  }
  long long delay = fake_env_ll("FAKE_CUFILE_DRIVER_OPEN_DELAY_MS", 0);
  if (delay > 0) usleep((useconds_t)(delay * 1000));
}

FAKE_API CUfileError_t cuFileDriverOpen(void) {
  note_driver_open();
  long long forced = fake_env_ll("FAKE_CUFILE_DRIVER_OPEN_ERROR", 0);
  if (forced) return fcf_status((int)forced, 0);
  pthread_mutex_lock(&g_mu);
  int already = g_driver_open;
  pthread_mutex_unlock(&g_mu);
  if (already) return fcf_status(CU_FILE_DRIVER_ALREADY_OPEN, 0);
  /* The real library binds to the calling thread's context; opening without one fails. */
  void *ctx = NULL;
  int cr = cuCtxGetCurrent(&ctx);
  if (cr || !ctx) return fcf_status(CU_FILE_CUDA_DRIVER_ERROR, cr ? cr : 201 /* INVALID_CONTEXT */);
  pthread_mutex_lock(&g_mu);
  int raced = g_driver_open;
  g_driver_open = 1;
  pthread_mutex_unlock(&g_mu);
  return fcf_status(raced ? CU_FILE_DRIVER_ALREADY_OPEN : CU_FILE_SUCCESS, 0);
}

static CUfileError_t close_driver(void) {
  pthread_mutex_lock(&g_mu);
  int was_open = g_driver_open;
  g_driver_open = 0;
  /* Closing the real driver drops its buffer registrations; handles stay the caller's to free. */
  fake_buf *b = was_open ? g_bufs : NULL;
  if (was_open) g_bufs = NULL;
  pthread_mutex_unlock(&g_mu);
  while (b) {
    fake_buf *next = b->next;
    fcf_stats_registered(b->device, -(long long)b->len);
    free(b);
    b = next;
  }
  return fcf_status(was_open ? CU_FILE_SUCCESS : CU_FILE_DRIVER_NOT_INITIALIZED, 0);
}

FAKE_API CUfileError_t cuFileDriverClose_v2(void) { return close_driver(); }

FAKE_API CUfileError_t cuFileDriverClose(void) { return close_driver(); }

FAKE_API long cuFileUseCount(void) {
  pthread_mutex_lock(&g_mu);
  long n = g_driver_open ? 1 : 0;
  pthread_mutex_unlock(&g_mu);
  return n;
}

static int driver_open(void) {
  pthread_mutex_lock(&g_mu);
  int open = g_driver_open;
  pthread_mutex_unlock(&g_mu);
  return open;
}

FAKE_API CUfileError_t cuFileDriverGetProperties(CUfileDrvProps_t *p) {
  if (!p) return fcf_status(CU_FILE_INVALID_VALUE, 0);
  if (!driver_open()) return fcf_status(CU_FILE_DRIVER_NOT_INITIALIZED, 0);
  int nvfs = fake_env_ll("FAKE_CUFILE_NVFS", 1) != 0;
  *p = (CUfileDrvProps_t){
      .nvfs_major = nvfs ? 2 : 0,
      .nvfs_minor = nvfs ? 17 : 0,
      .poll_thresh_size_kb = 4,
      .max_direct_io_size_kb = 16384,
      .dstatusflags = 1u << 4,  /* NVMe supported */
      .dcontrolflags = 1u << 1, /* compatibility mode allowed */
      .fflags = 0,              /* no batch or stream API: the fake implements neither */
      .max_device_cache_size = 131072,
      .per_buffer_cache_size = 1024,
      .max_device_pinned_mem_size = 33554432,
      .max_batch_io_size = 128,
      .max_batch_io_timeout_msecs = 5,
  };
  return fcf_status(CU_FILE_SUCCESS, 0);
}

/* 256 MiB: the classic BAR1 aperture of a GPU without resizable BAR. */
FAKE_API CUfileError_t cuFileGetBARSizeInKB(int gpu, size_t *kib) {
  int count = 0;
  if (!kib || cuDeviceGetCount(&count) != 0 || gpu < 0 || gpu >= count)
    return fcf_status(CU_FILE_INVALID_VALUE, 0);
  *kib = 256 * 1024;
  return fcf_status(CU_FILE_SUCCESS, 0);
}

/* ---- file handles -------------------------------------------------------------------------- */

/*
 * The addon registers descriptors opened with O_DIRECT, and the real cuFile copes with any
 * alignment. pread into arbitrary memory at arbitrary offsets through O_DIRECT fails with
 * EINVAL, so I/O goes through a second open file description of the same file without
 * O_DIRECT (clearing the flag on the caller's fd would change it for the caller too).
 */
static int open_io_fd(int fd) {
  int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || !(flags & O_DIRECT)) return fd;
  char path[64];
  snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  int io = open(path, (flags & O_ACCMODE) | O_CLOEXEC);
  return io < 0 ? fd : io;
}

static fake_handle *find_handle_locked(CUfileHandle_t fh) {
  fake_handle *h = g_handles;
  while (h && h != fh) h = h->next;
  return h;
}

FAKE_API CUfileError_t cuFileHandleRegister(CUfileHandle_t *fh, CUfileDescr_t *descr) {
  if (!fh || !descr) return fcf_status(CU_FILE_INVALID_VALUE, 0);
  if (!driver_open()) return fcf_status(CU_FILE_DRIVER_NOT_INITIALIZED, 0);
  struct stat st;
  if (descr->type != CU_FILE_HANDLE_TYPE_OPAQUE_FD || descr->handle.fd < 0 ||
      fstat(descr->handle.fd, &st) != 0 || !S_ISREG(st.st_mode))
    return fcf_status(CU_FILE_INVALID_FILE_TYPE, 0);
  long long forced = fake_env_ll("FAKE_CUFILE_REGISTER_ERROR", 0);
  if (forced) return fcf_status((int)forced, 0);
  fake_handle *h = calloc(1, sizeof *h);
  if (!h) return fcf_status(CU_FILE_INTERNAL_ERROR, 0);
  h->fd = descr->handle.fd;
  h->io_fd = open_io_fd(h->fd);
  pthread_mutex_lock(&g_mu);
  h->next = g_handles;
  g_handles = h;
  g_open_handles++;
  pthread_mutex_unlock(&g_mu);
  *fh = h;
  return fcf_status(CU_FILE_SUCCESS, 0);
}

FAKE_API void cuFileHandleDeregister(CUfileHandle_t fh) {
  pthread_mutex_lock(&g_mu);
  fake_handle **pp = &g_handles;
  while (*pp && *pp != fh) pp = &(*pp)->next;
  fake_handle *h = *pp;
  if (h) {
    *pp = h->next;
    g_open_handles--;
  }
  pthread_mutex_unlock(&g_mu);
  if (!h) return;
  if (h->io_fd != h->fd) close(h->io_fd);
  free(h);
}

/* ---- buffer registration ------------------------------------------------------------------- */

FAKE_API CUfileError_t cuFileBufRegister(const void *ptr, size_t len, int flags) {
  (void)flags;
  if (!ptr || !len) return fcf_status(CU_FILE_INVALID_VALUE, 0);
  if (!driver_open()) return fcf_status(CU_FILE_DRIVER_NOT_INITIALIZED, 0);
  void *base;
  size_t size;
  int dev;
  if (!fake_cuda_lookup(ptr, &base, &size, &dev) || len > size - (size_t)((const char *)ptr - (char *)base))
    return fcf_status(CU_FILE_CUDA_POINTER_INVALID, 0);
  fake_buf *b = calloc(1, sizeof *b);
  if (!b) return fcf_status(CU_FILE_INTERNAL_ERROR, 0);
  *b = (fake_buf){.ptr = ptr, .len = len, .device = dev};
  pthread_mutex_lock(&g_mu);
  fake_buf *o = g_bufs;
  while (o && o->ptr != ptr) o = o->next;
  if (!o) {
    b->next = g_bufs;
    g_bufs = b;
  }
  pthread_mutex_unlock(&g_mu);
  if (o) {
    free(b);
    return fcf_status(CU_FILE_MEMORY_ALREADY_REGISTERED, 0);
  }
  fcf_stats_registered(dev, (long long)len);
  return fcf_status(CU_FILE_SUCCESS, 0);
}

FAKE_API CUfileError_t cuFileBufDeregister(const void *ptr) {
  if (!driver_open()) return fcf_status(CU_FILE_DRIVER_NOT_INITIALIZED, 0);
  pthread_mutex_lock(&g_mu);
  fake_buf **pp = &g_bufs;
  while (*pp && (*pp)->ptr != ptr) pp = &(*pp)->next;
  fake_buf *b = *pp;
  if (b) *pp = b->next;
  pthread_mutex_unlock(&g_mu);
  if (!b) return fcf_status(CU_FILE_MEMORY_NOT_REGISTERED, 0);
  fcf_stats_registered(b->device, -(long long)b->len);
  free(b);
  return fcf_status(CU_FILE_SUCCESS, 0);
}

/* ---- I/O ----------------------------------------------------------------------------------- */

/*
 * FAKE_CUFILE_FAIL_AFTER=N[:tag] counts calls that got past validation. JavaScript tests cannot
 * reach fake_cufile_reset_counters, so the count also restarts whenever the variable's value
 * changes; the optional ":tag" lets two tests in a row use the same N and still start from zero.
 */
static fake_inject g_inject = FAKE_INJECT_INIT;

static int io_should_fail(void) { return fake_inject_should_fail(&g_inject, "FAKE_CUFILE_FAIL_AFTER"); }

/* The failure conventions a cuFile caller must handle: a negative cuFile code, or -1 with errno. */
static ssize_t injected_failure(void) {
  const char *style = getenv("FAKE_CUFILE_FAIL_STYLE");
  if (style && strcmp(style, "errno") == 0) {
    errno = EIO;
    return -1;
  }
  if (style && strcmp(style, "errno-cufile") == 0) {
    errno = CU_FILE_IO_ERROR;
    return -1;
  }
  return -CU_FILE_IO_ERROR;
}

static ssize_t do_io(int write, CUfileHandle_t fh, char *base, size_t size, off_t file_offset,
                     off_t buf_offset) {
  atomic_fetch_add(&g_io_calls, 1);
  pthread_mutex_lock(&g_mu);
  int open = g_driver_open;
  fake_handle *h = find_handle_locked(fh);
  int fd = h ? h->io_fd : -1;
  pthread_mutex_unlock(&g_mu);
  if (!open) return -CU_FILE_DRIVER_NOT_INITIALIZED;
  if (!h) return -CU_FILE_HANDLE_NOT_REGISTERED;
  if (file_offset < 0 || buf_offset < 0) return -CU_FILE_INVALID_VALUE;

  /* base and base + buf_offset .. + size must all lie in one allocation of the fake libcuda. */
  void *alloc;
  size_t alloc_size;
  int dev;
  if (!base || !fake_cuda_lookup(base, &alloc, &alloc_size, &dev)) return -CU_FILE_CUDA_POINTER_INVALID;
  size_t start = (size_t)(base - (char *)alloc);
  if ((size_t)buf_offset > alloc_size - start || size > alloc_size - start - (size_t)buf_offset)
    return -CU_FILE_CUDA_POINTER_INVALID;
  char *addr = base + buf_offset;
  if (size == 0) return 0;

  int unaligned = (((uintptr_t)addr | (uint64_t)file_offset | size) & 4095) != 0;
  if (io_should_fail()) {
    fcf_stats_io(dev, write, 0, 0, unaligned);
    return injected_failure();
  }

  long long short_limit = fake_env_ll("FAKE_CUFILE_SHORT", 0);
  size_t want = short_limit > 0 && (unsigned long long)short_limit < size ? (size_t)short_limit : size;
  size_t done = 0;
  while (done < want) {
    ssize_t n = write ? pwrite(fd, addr + done, want - done, file_offset + (off_t)done)
                      : pread(fd, addr + done, want - done, file_offset + (off_t)done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int saved = errno;
      fcf_stats_io(dev, write, 0, 0, unaligned);
      errno = saved;
      return -1;
    }
    if (n == 0) break; /* end of file */
    done += (size_t)n;
  }
  fcf_stats_io(dev, write, 1, done, unaligned);
  return (ssize_t)done;
}

FAKE_API ssize_t cuFileRead(CUfileHandle_t fh, void *base, size_t size, off_t file_offset, off_t buf_offset) {
  return do_io(0, fh, base, size, file_offset, buf_offset);
}

FAKE_API ssize_t cuFileWrite(CUfileHandle_t fh, const void *base, size_t size, off_t file_offset,
                             off_t buf_offset) {
  return do_io(1, fh, (char *)base, size, file_offset, buf_offset);
}

/* ---- fake-only exports --------------------------------------------------------------------- */

FAKE_API void fake_cufile_reset_counters(void) {
  atomic_store(&g_io_calls, 0);
  fake_inject_reset(&g_inject);
}

FAKE_API long long fake_cufile_io_calls(void) { return atomic_load(&g_io_calls); }

FAKE_API int fake_cufile_open_handles(void) {
  pthread_mutex_lock(&g_mu);
  int n = g_open_handles;
  pthread_mutex_unlock(&g_mu);
  return n;
}
