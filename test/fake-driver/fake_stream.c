/*
 * Test-only fake of libcuda.so.1, stream part. Asynchronous copies are asynchronous on purpose:
 * each stream has a worker thread that sleeps FAKE_CUDA_ASYNC_DELAY_US before every copy, so a
 * library that reuses or reads a staging buffer before synchronising sees wrong bytes in tests.
 * Events are in fake_event.c.
 */
#define _GNU_SOURCE
#include "fake_stream.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Stream handle 0: the process-wide default stream, whose worker starts when first given work. */
static struct fake_stream g_default = {
    .mu = PTHREAD_MUTEX_INITIALIZER, .work = PTHREAD_COND_INITIALIZER, .idle = PTHREAD_COND_INITIALIZER};

static pthread_mutex_t g_streams_mu = PTHREAD_MUTEX_INITIALIZER;
static struct fake_stream *g_streams;

static CUresult lookup_stream(CUstream h, struct fake_stream **out) {
  if (!h) {
    *out = &g_default;
    return CUDA_SUCCESS;
  }
  pthread_mutex_lock(&g_streams_mu);
  struct fake_stream *s = g_streams;
  while (s && s != h) s = s->next_live;
  pthread_mutex_unlock(&g_streams_mu);
  *out = s;
  return s ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

static void sleep_us(long long us) {
  if (us <= 0) return;
  struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = (us % 1000000) * 1000};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static void run_item(struct fake_stream *s, item *it) {
  if (it->kind == ITEM_COPY) {
    sleep_us(it->delay_us);
    if (it->fail) {
      pthread_mutex_lock(&s->mu);
      s->fail_seq = it->seq;
      pthread_mutex_unlock(&s->mu);
    } else {
      memcpy(it->dst, it->src, it->n);
    }
    fk_release(it->dev_rec);
    fk_release(it->host_rec);
  } else {
    pthread_mutex_lock(&s->mu);
    unsigned long long failed = s->fail_seq;
    pthread_mutex_unlock(&s->mu);
    fk_event_marker_passed(it->ev, it->gen, failed);
  }
  free(it);
}

static void *worker(void *arg) {
  struct fake_stream *s = arg;
  pthread_mutex_lock(&s->mu);
  for (;;) {
    while (!s->head && !s->stop) pthread_cond_wait(&s->work, &s->mu);
    item *it = s->head;
    if (!it) break;
    s->head = it->next;
    if (!s->head) s->tail = NULL;
    s->busy = 1;
    pthread_mutex_unlock(&s->mu);
    run_item(s, it);
    pthread_mutex_lock(&s->mu);
    s->busy = 0;
    if (!s->head) pthread_cond_broadcast(&s->idle);
  }
  pthread_mutex_unlock(&s->mu);
  return NULL;
}

/* Caller holds s->mu, or s is not published yet. */
static CUresult start_worker(struct fake_stream *s) {
  /* Signals stay with the host process's own threads (Node handles them on its loop). */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int err = pthread_create(&s->thread, NULL, worker, s);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  s->started = !err;
  return err ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
}

/* Like lookup_stream, but about to queue work: the default stream's worker starts on first use. */
CUresult fk_stream_for_work(CUstream h, struct fake_stream **out) {
  CUresult r = lookup_stream(h, out);
  if (r || h) return r;
  pthread_mutex_lock(&g_default.mu);
  r = g_default.started ? CUDA_SUCCESS : start_worker(&g_default);
  pthread_mutex_unlock(&g_default.mu);
  return r;
}

void fk_enqueue(struct fake_stream *s, item *it) {
  pthread_mutex_lock(&s->mu);
  it->seq = ++s->seq;
  if (s->tail) s->tail->next = it;
  else s->head = it;
  s->tail = it;
  pthread_cond_signal(&s->work);
  pthread_mutex_unlock(&s->mu);
}

static void drain_locked(struct fake_stream *s) {
  while (s->head || s->busy) pthread_cond_wait(&s->idle, &s->mu);
}

/*
 * Synchronous copies and cuStreamSynchronize(0) belong to the legacy default stream, which the
 * real driver orders after all earlier work in blocking streams. Without this a library that is
 * correct on a GPU would fail here. g_streams_mu is held so that no stream is destroyed meanwhile.
 */
void fk_legacy_sync(void) {
  pthread_mutex_lock(&g_streams_mu);
  for (struct fake_stream *s = g_streams; s; s = s->next_live) {
    if (s->non_blocking) continue;
    pthread_mutex_lock(&s->mu);
    drain_locked(s);
    pthread_mutex_unlock(&s->mu);
  }
  pthread_mutex_lock(&g_default.mu);
  drain_locked(&g_default);
  pthread_mutex_unlock(&g_default.mu);
  pthread_mutex_unlock(&g_streams_mu);
}

/* ---- streams ------------------------------------------------------------------------------- */

FAKE_API CUresult cuStreamCreate(CUstream *out, unsigned flags) {
  CUresult r = fk_check_ctx(NULL);
  if (r) return r;
  if (!out || flags > 1) return CUDA_ERROR_INVALID_VALUE;
  struct fake_stream *s = calloc(1, sizeof *s);
  if (!s) return CUDA_ERROR_OUT_OF_MEMORY;
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->work, NULL);
  pthread_cond_init(&s->idle, NULL);
  s->non_blocking = flags & 1;
  if (start_worker(s)) {
    pthread_cond_destroy(&s->work);
    pthread_cond_destroy(&s->idle);
    pthread_mutex_destroy(&s->mu);
    free(s);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  pthread_mutex_lock(&g_streams_mu);
  s->next_live = g_streams;
  g_streams = s;
  pthread_mutex_unlock(&g_streams_mu);
  *out = s;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuStreamDestroy_v2(CUstream h) {
  CUresult r = fk_check_init();
  if (r) return r;
  if (!h) return CUDA_ERROR_INVALID_HANDLE;
  pthread_mutex_lock(&g_streams_mu);
  struct fake_stream **pp = &g_streams;
  while (*pp && *pp != h) pp = &(*pp)->next_live;
  struct fake_stream *s = *pp;
  if (s) *pp = s->next_live;
  pthread_mutex_unlock(&g_streams_mu);
  if (!s) return CUDA_ERROR_INVALID_HANDLE;
  pthread_mutex_lock(&s->mu);
  drain_locked(s);
  s->stop = 1;
  pthread_cond_signal(&s->work);
  pthread_mutex_unlock(&s->mu);
  pthread_join(s->thread, NULL);
  fk_events_forget_stream(s);
  pthread_cond_destroy(&s->work);
  pthread_cond_destroy(&s->idle);
  pthread_mutex_destroy(&s->mu);
  free(s);
  return CUDA_SUCCESS;
}

/* Waits (or with wait == 0 only looks), then reports a failure no synchronisation has reported. */
static CUresult settle(CUstream h, int wait) {
  CUresult r = fk_check_init();
  struct fake_stream *s;
  if (r || (r = lookup_stream(h, &s))) return r;
  if (wait && !h) fk_legacy_sync();
  pthread_mutex_lock(&s->mu);
  if (wait) drain_locked(s);
  if (s->head || s->busy) r = CUDA_ERROR_NOT_READY;
  else if (s->fail_seq > s->reported_seq) r = CUDA_ERROR_ILLEGAL_ADDRESS;
  if (r != CUDA_ERROR_NOT_READY) s->reported_seq = s->fail_seq;
  pthread_mutex_unlock(&s->mu);
  return r;
}

FAKE_API CUresult cuStreamSynchronize(CUstream h) { return settle(h, 1); }

FAKE_API CUresult cuStreamQuery(CUstream h) { return settle(h, 0); }

/* ---- asynchronous copies ------------------------------------------------------------------- */

CUresult fk_async_copy(void *dst, const void *src, size_t n, CUdeviceptr device_side, const void *host_side,
                       CUstream h) {
  CUresult r = fk_check_ctx(NULL);
  struct fake_stream *s;
  if (r || (r = fk_stream_for_work(h, &s))) return r;
  if (!n) return CUDA_SUCCESS;
  if (!dst || !src) return CUDA_ERROR_INVALID_VALUE;
  fake_rec *dev;
  if (fk_acquire_device_range(device_side, n, &dev)) return CUDA_ERROR_INVALID_VALUE;
  item *it = calloc(1, sizeof *it);
  if (!it) {
    fk_release(dev);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  it->kind = ITEM_COPY;
  it->dst = dst;
  it->src = src;
  it->n = n;
  it->dev_rec = dev;
  it->host_rec = fk_acquire_host(host_side);
  /* Decided now, in call order, so that "fail after N" does not depend on worker timing. */
  it->fail = fk_copy_should_fail();
  /* Read here rather than in the worker: getenv must not race the test's setenv. */
  it->delay_us = fake_env_ll("FAKE_CUDA_ASYNC_DELAY_US", 200);
  fk_enqueue(s, it);
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream h) {
  return fk_async_copy((void *)(uintptr_t)dst, src, n, dst, src, h);
}

FAKE_API CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, CUstream h) {
  return fk_async_copy(dst, (const void *)(uintptr_t)src, n, src, dst, h);
}

