/*
 * Test-only fake of libcuda.so.1: devices are numbers and every switch is an environment variable
 * read on each call (README.md lists them). This file holds initialisation, devices and contexts;
 * memory is in fake_memory.c, streams and events in fake_stream.c. Never loaded by users: only
 * tests point PENSTOCK_CUDA_LIBRARY at it.
 */
#define _GNU_SOURCE
#include "fake_internal.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#define DEFAULT_MEM (16ULL << 30)
#define CTX_STACK 32

struct fake_ctx {
  int device;
  atomic_int refs;
};

#define CTX(n) {n, 0}
static struct fake_ctx g_ctx[MAX_DEVICES] = {CTX(0), CTX(1), CTX(2),  CTX(3),  CTX(4),  CTX(5),
                                             CTX(6), CTX(7), CTX(8),  CTX(9),  CTX(10), CTX(11),
                                             CTX(12), CTX(13), CTX(14), CTX(15)};

static atomic_int g_inited;

/* The real driver keeps a per-thread context stack; the addon's pool threads each need their own. */
static _Thread_local struct fake_ctx *tl_stack[CTX_STACK];
static _Thread_local int tl_depth;

/* FAKE_CUDA_VISIBLE_DEVICES="2,0": ordinal 0 is physical GPU 2, ordinal 1 physical GPU 0.
   Returns how many ordinals it names (0 when unset or malformed) and fills `phys`. */
static int visible_devices(int phys[MAX_DEVICES]) {
  const char *v = getenv("FAKE_CUDA_VISIBLE_DEVICES");
  if (!v || !*v) return 0;
  int n = 0;
  for (const char *c = v; *c && n < MAX_DEVICES;) {
    char *end;
    long d = strtol(c, &end, 10);
    if (end == c || d < 0 || d >= MAX_DEVICES) return 0;
    phys[n++] = (int)d;
    c = *end == ',' ? end + 1 : end;
    if (*end && *end != ',') return 0;
  }
  return n;
}

int fk_device_count(void) {
  int phys[MAX_DEVICES];
  int visible = visible_devices(phys);
  if (visible) return visible;
  long long n = fake_env_ll("FAKE_CUDA_DEVICE_COUNT", 1);
  return n < 0 ? 1 : n > MAX_DEVICES ? MAX_DEVICES : (int)n;
}

int fk_physical_device(int ordinal) {
  int phys[MAX_DEVICES];
  int visible = visible_devices(phys);
  return visible && ordinal >= 0 && ordinal < visible ? phys[ordinal] : ordinal;
}

int fk_ordinal_of_physical(int physical) {
  for (int d = 0; d < fk_device_count(); d++)
    if (fk_physical_device(d) == physical) return d;
  return -1;
}

int fk_pinned_unmap(void) { return fake_env_ll("FAKE_CUDA_PINNED_UNMAP", 0) == 1; }

unsigned long long fk_mem_limit(void) {
  long long v = fake_env_ll("FAKE_CUDA_MEM_LIMIT", (long long)DEFAULT_MEM);
  return v < 0 ? DEFAULT_MEM : (unsigned long long)v;
}

int fk_valid_device(int d) { return d >= 0 && d < fk_device_count(); }

static struct fake_ctx *as_ctx(CUcontext c) {
  for (int i = 0; i < MAX_DEVICES; i++)
    if (c == &g_ctx[i]) return c;
  return NULL;
}

CUresult fk_check_init(void) { return atomic_load(&g_inited) ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED; }

CUresult fk_check_ctx(int *device) {
  if (!atomic_load(&g_inited)) return CUDA_ERROR_NOT_INITIALIZED;
  struct fake_ctx *c = tl_depth ? tl_stack[tl_depth - 1] : NULL;
  /* A released primary context is destroyed in the real driver; using it is a bug worth catching. */
  if (!c || atomic_load(&c->refs) <= 0 || !fk_valid_device(c->device)) return CUDA_ERROR_INVALID_CONTEXT;
  if (device) *device = c->device;
  return CUDA_SUCCESS;
}

/* ---- errors, init, devices ---------------------------------------------------------------- */

static const struct {
  int code;
  const char *name, *text;
} k_errors[] = {
    {0, "CUDA_SUCCESS", "no error"},
    {1, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {3, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {101, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {201, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {400, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {600, "CUDA_ERROR_NOT_READY", "device not ready"},
    {700, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {712, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED", "part or all of the requested memory range is already mapped"},
    {713, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED", "pointer does not correspond to a registered memory region"},
    {801, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {999, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

static CUresult error_text(CUresult e, const char **out, int want_name) {
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < sizeof k_errors / sizeof k_errors[0]; i++)
    if (k_errors[i].code == e) {
      *out = want_name ? k_errors[i].name : k_errors[i].text;
      return CUDA_SUCCESS;
    }
  *out = NULL;
  return CUDA_ERROR_INVALID_VALUE;
}

FAKE_API CUresult cuGetErrorName(CUresult e, const char **s) { return error_text(e, s, 1); }
FAKE_API CUresult cuGetErrorString(CUresult e, const char **s) { return error_text(e, s, 0); }

FAKE_API CUresult cuInit(unsigned flags) {
  if (flags) return CUDA_ERROR_INVALID_VALUE;
  if (fk_device_count() == 0) return CUDA_ERROR_NO_DEVICE;
  atomic_store(&g_inited, 1);
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuDriverGetVersion(int *v) {
  if (!v) return CUDA_ERROR_INVALID_VALUE;
  *v = 13000;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuDeviceGetCount(int *n) {
  CUresult r = fk_check_init();
  if (r) return r;
  if (!n) return CUDA_ERROR_INVALID_VALUE;
  *n = fk_device_count();
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuDeviceGet(CUdevice *d, int ordinal) {
  CUresult r = fk_check_init();
  if (r) return r;
  if (!d) return CUDA_ERROR_INVALID_VALUE;
  if (!fk_valid_device(ordinal)) return CUDA_ERROR_INVALID_DEVICE;
  *d = ordinal;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuDeviceGetName(char *name, int len, CUdevice d) {
  CUresult r = fk_check_init();
  if (r) return r;
  if (!name || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (!fk_valid_device(d)) return CUDA_ERROR_INVALID_DEVICE;
  snprintf(name, (size_t)len, "Fake GPU %d", d);
  return CUDA_SUCCESS;
}

/* Total memory follows FAKE_CUDA_MEM_LIMIT so that it always agrees with cuMemGetInfo. */
FAKE_API CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice d) {
  CUresult r = fk_check_init();
  if (r) return r;
  if (!bytes) return CUDA_ERROR_INVALID_VALUE;
  if (!fk_valid_device(d)) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = (size_t)fk_mem_limit();
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuDeviceGetAttribute(int *value, int attrib, CUdevice d) {
  CUresult r = fk_check_init();
  if (r) return r;
  if (!value) return CUDA_ERROR_INVALID_VALUE;
  if (!fk_valid_device(d)) return CUDA_ERROR_INVALID_DEVICE;
  switch (attrib) {
    case 75: *value = 9; break;         /* compute capability major */
    case 33: *value = 0x10 + fk_physical_device(d); break; /* PCI bus id */
    case 41: *value = 1; break;         /* unified addressing: every real GPU cuFile supports has it */
    default: *value = 0; break;         /* 76 minor, 34 PCI device, 50 PCI domain, and the rest */
  }
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuDeviceGetPCIBusId(char *bus, int len, CUdevice d) {
  CUresult r = fk_check_init();
  if (r) return r;
  if (!bus || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (!fk_valid_device(d)) return CUDA_ERROR_INVALID_DEVICE;
  snprintf(bus, (size_t)len, "0000:%02x:00.0", 0x10 + fk_physical_device(d));
  return CUDA_SUCCESS;
}

/* Accepts the forms the driver documents: [domain:]bus:device[.function], hexadecimal. */
FAKE_API CUresult cuDeviceGetByPCIBusId(CUdevice *dev, const char *bus) {
  CUresult r = fk_check_init();
  if (r) return r;
  if (!dev || !bus) return CUDA_ERROR_INVALID_VALUE;
  unsigned a = 0, b = 0, c = 0, f = 0;
  char tail;
  unsigned domain = 0, busno, devno;
  if (sscanf(bus, "%x:%x:%x.%x%c", &a, &b, &c, &f, &tail) == 4 || sscanf(bus, "%x:%x:%x%c", &a, &b, &c, &tail) == 3) {
    domain = a, busno = b, devno = c;
  } else if (sscanf(bus, "%x:%x.%x%c", &a, &b, &f, &tail) == 3) {
    busno = a, devno = b;
  } else {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (domain != 0 || devno != 0 || f != 0 || busno < 0x10) return CUDA_ERROR_INVALID_DEVICE;
  int d = fk_ordinal_of_physical((int)busno - 0x10);
  if (d < 0) return CUDA_ERROR_INVALID_DEVICE;
  *dev = d;
  return CUDA_SUCCESS;
}

/* ---- contexts ------------------------------------------------------------------------------ */

FAKE_API CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice d) {
  CUresult r = fk_check_init();
  if (r) return r;
  if (!ctx) return CUDA_ERROR_INVALID_VALUE;
  if (!fk_valid_device(d)) return CUDA_ERROR_INVALID_DEVICE;
  atomic_fetch_add(&g_ctx[d].refs, 1);
  *ctx = &g_ctx[d];
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) {
  CUresult r = fk_check_init();
  if (r) return r;
  if (!fk_valid_device(d)) return CUDA_ERROR_INVALID_DEVICE;
  int refs = atomic_load(&g_ctx[d].refs);
  do {
    if (refs <= 0) return CUDA_ERROR_INVALID_CONTEXT; /* released more often than retained */
  } while (!atomic_compare_exchange_weak(&g_ctx[d].refs, &refs, refs - 1));
  return CUDA_SUCCESS;
}

/* Like the real driver: replaces the top of the stack, and NULL pops it. */
FAKE_API CUresult cuCtxSetCurrent(CUcontext ctx) {
  CUresult r = fk_check_init();
  if (r) return r;
  if (!ctx) {
    if (tl_depth) tl_depth--;
    return CUDA_SUCCESS;
  }
  if (!as_ctx(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
  if (!tl_depth) tl_depth = 1;
  tl_stack[tl_depth - 1] = ctx;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuCtxGetCurrent(CUcontext *ctx) {
  CUresult r = fk_check_init();
  if (r) return r;
  if (!ctx) return CUDA_ERROR_INVALID_VALUE;
  *ctx = tl_depth ? tl_stack[tl_depth - 1] : NULL;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuCtxGetDevice(CUdevice *d) {
  CUresult r = fk_check_init();
  if (r) return r;
  if (!d) return CUDA_ERROR_INVALID_VALUE;
  if (!tl_depth) return CUDA_ERROR_INVALID_CONTEXT;
  *d = tl_stack[tl_depth - 1]->device;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuCtxPushCurrent_v2(CUcontext ctx) {
  CUresult r = fk_check_init();
  if (r) return r;
  if (!as_ctx(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
  if (tl_depth == CTX_STACK) return CUDA_ERROR_UNKNOWN;
  tl_stack[tl_depth++] = ctx;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuCtxPopCurrent_v2(CUcontext *ctx) {
  CUresult r = fk_check_init();
  if (r) return r;
  if (!tl_depth) return CUDA_ERROR_INVALID_CONTEXT;
  struct fake_ctx *top = tl_stack[--tl_depth];
  if (ctx) *ctx = top;
  return CUDA_SUCCESS;
}

CUcontext fk_device_ctx(int device) { return &g_ctx[device]; }
