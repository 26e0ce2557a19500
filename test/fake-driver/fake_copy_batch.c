/*
 * Test-only fake of libcuda.so.1: many copies in one call. cuMemcpyBatchAsync has the CUDA
 * 12.8-12.9 form (with failIdx); cuMemcpyBatchAsync_v2 the CUDA 13 form (without), left out of
 * the copy-batch-v1 build (FAKE_COPY_BATCH_V1_ONLY). The arguments are checked as the driver's
 * documentation states (a count and attributes, attribute indices from 0 and rising, a valid
 * source access order, not the legacy default stream), then every copy is checked before any
 * is queued: one end must be device memory, the other host memory (the fake's choice: no
 * device-to-device copies). Each copy is then queued like a cuMemcpyHtoDAsync_v2 or
 * cuMemcpyDtoHAsync_v2 on the stream, and counts against FAKE_CUDA_FAIL_COPY_AFTER as they do.
 * FAKE_CUDA_COPY_BATCH_MAX refuses calls of more copies than it says.
 */
#include "fake_stream.h"
#include "fake_switches.h"

#include <stdint.h>

typedef struct {
  int type;
  int id;
} fk_location;

typedef struct {
  int src_access_order; /* 1 stream, 2 during the call, 3 any */
  fk_location src_hint, dst_hint;
  unsigned flags; /* 0, or 1: prefer overlap with compute */
} fk_copy_attrs;

_Static_assert(sizeof(fk_copy_attrs) == 24, "CUmemcpyAttributes is 24 bytes");

/* Whether [p, p+n) lies in one device allocation. */
static int on_device(CUdeviceptr p, size_t n) {
  fake_rec *rec;
  if (fk_acquire_device_range(p, n, &rec)) return 0;
  fk_release(rec);
  return 1;
}

static CUresult copy_batch(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
                           const fk_copy_attrs *attrs, const size_t *attrs_idxs, size_t num_attrs,
                           size_t *fail_idx, CUstream h) {
  if (fail_idx) *fail_idx = SIZE_MAX;
  CUresult r = fk_check_ctx(NULL);
  if (r) return r;
  if (!count || !dsts || !srcs || !sizes || !attrs || !attrs_idxs || !num_attrs || num_attrs > count || !h)
    return CUDA_ERROR_INVALID_VALUE;
  /* A driver with a limit of its own (none is documented): FAKE_CUDA_COPY_BATCH_MAX. */
  long long most = fake_env_ll("FAKE_CUDA_COPY_BATCH_MAX", 0);
  if (most > 0 && count > (unsigned long long)most) return CUDA_ERROR_INVALID_VALUE;
  for (size_t k = 0; k < num_attrs; ++k) {
    if (attrs_idxs[k] >= count || (k == 0 ? attrs_idxs[k] != 0 : attrs_idxs[k] <= attrs_idxs[k - 1]))
      return CUDA_ERROR_INVALID_VALUE;
    if (attrs[k].src_access_order < 1 || attrs[k].src_access_order > 3 || attrs[k].flags > 1)
      return CUDA_ERROR_INVALID_VALUE;
  }
  for (size_t i = 0; i < count; ++i) {
    int to_device = on_device(dsts[i], sizes[i]), from_device = on_device(srcs[i], sizes[i]);
    if (!sizes[i] || to_device == from_device) {
      if (fail_idx) *fail_idx = i;
      return CUDA_ERROR_INVALID_VALUE;
    }
  }
  for (size_t i = 0; i < count; ++i) {
    void *dst = (void *)(uintptr_t)dsts[i];
    const void *src = (const void *)(uintptr_t)srcs[i];
    int to_device = on_device(dsts[i], sizes[i]);
    r = fk_async_copy(dst, src, sizes[i], to_device ? dsts[i] : srcs[i], to_device ? src : dst, h);
    if (r) {
      if (fail_idx) *fail_idx = i;
      return r;
    }
  }
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemcpyBatchAsync(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
                                     fk_copy_attrs *attrs, size_t *attrs_idxs, size_t num_attrs, size_t *fail_idx,
                                     CUstream h) {
  return copy_batch(dsts, srcs, sizes, count, attrs, attrs_idxs, num_attrs, fail_idx, h);
}

#ifndef FAKE_COPY_BATCH_V1_ONLY
FAKE_API CUresult cuMemcpyBatchAsync_v2(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
                                        fk_copy_attrs *attrs, size_t *attrs_idxs, size_t num_attrs, CUstream h) {
  return copy_batch(dsts, srcs, sizes, count, attrs, attrs_idxs, num_attrs, NULL, h);
}
#endif
