/*
 * Test-only fake of libcuda.so.1, event part. An event is a marker in its stream's queue: it is
 * complete once the stream's worker has passed it, i.e. after every copy queued before it.
 */
#define _GNU_SOURCE
#include "fake_stream.h"

#include <stdlib.h>

struct fake_event {
  struct fake_event *next_live;
  int refs; /* the handle plus each queued marker: a destroyed event may still be in a queue */
  int recorded, done, resolved;
  CUresult result;
  unsigned gen; /* re-recording makes markers of earlier recordings stale */
  unsigned long long fail_seq;
  struct fake_stream *stream; /* NULL once that stream is destroyed */
};

/* One lock for all events keeps marker completion simple; order is g_ev_mu before stream->mu. */
static pthread_mutex_t g_ev_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_ev_cv = PTHREAD_COND_INITIALIZER;
static struct fake_event *g_events;

static struct fake_event *find_event_locked(CUevent e) {
  struct fake_event *v = g_events;
  while (v && v != e) v = v->next_live;
  return v;
}

/* Caller holds g_ev_mu; the answer is fixed at the first query so repeated syncs agree. */
static CUresult resolve_event_locked(struct fake_event *e) {
  if (!e->recorded || !e->done) return CUDA_SUCCESS;
  if (!e->resolved) {
    CUresult r = CUDA_SUCCESS;
    if (e->fail_seq && e->stream) {
      pthread_mutex_lock(&e->stream->mu);
      if (e->fail_seq > e->stream->reported_seq) {
        r = CUDA_ERROR_ILLEGAL_ADDRESS;
        e->stream->reported_seq = e->fail_seq;
      }
      pthread_mutex_unlock(&e->stream->mu);
    } else if (e->fail_seq) {
      r = CUDA_ERROR_ILLEGAL_ADDRESS;
    }
    e->result = r;
    e->resolved = 1;
  }
  return e->result;
}

void fk_event_marker_passed(struct fake_event *e, unsigned gen, unsigned long long failed) {
  pthread_mutex_lock(&g_ev_mu);
  if (e->gen == gen) {
    e->done = 1;
    e->fail_seq = failed;
  }
  if (--e->refs == 0) free(e);
  pthread_cond_broadcast(&g_ev_cv);
  pthread_mutex_unlock(&g_ev_mu);
}

void fk_events_forget_stream(struct fake_stream *s) {
  pthread_mutex_lock(&g_ev_mu);
  for (struct fake_event *e = g_events; e; e = e->next_live)
    if (e->stream == s) {
      resolve_event_locked(e);
      e->stream = NULL;
    }
  pthread_mutex_unlock(&g_ev_mu);
}

FAKE_API CUresult cuEventCreate(CUevent *out, unsigned flags) {
  CUresult r = fk_check_ctx(NULL);
  if (r) return r;
  if (!out || (flags & ~7u)) return CUDA_ERROR_INVALID_VALUE;
  struct fake_event *e = calloc(1, sizeof *e);
  if (!e) return CUDA_ERROR_OUT_OF_MEMORY;
  e->refs = 1;
  pthread_mutex_lock(&g_ev_mu);
  e->next_live = g_events;
  g_events = e;
  pthread_mutex_unlock(&g_ev_mu);
  *out = e;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuEventRecord(CUevent h, CUstream sh) {
  CUresult r = fk_check_init();
  struct fake_stream *s;
  if (r || (r = fk_stream_for_work(sh, &s))) return r;
  item *it = calloc(1, sizeof *it);
  if (!it) return CUDA_ERROR_OUT_OF_MEMORY;
  pthread_mutex_lock(&g_ev_mu);
  struct fake_event *e = find_event_locked(h);
  if (e) {
    e->gen++;
    e->recorded = 1;
    e->done = e->resolved = 0;
    e->fail_seq = 0;
    e->stream = s;
    e->refs++;
    it->kind = ITEM_MARKER;
    it->ev = e;
    it->gen = e->gen;
  }
  pthread_mutex_unlock(&g_ev_mu);
  if (!e) {
    free(it);
    return CUDA_ERROR_INVALID_HANDLE;
  }
  fk_enqueue(s, it);
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuEventSynchronize(CUevent h) {
  CUresult r = fk_check_init();
  if (r) return r;
  pthread_mutex_lock(&g_ev_mu);
  struct fake_event *e = find_event_locked(h);
  if (!e) {
    pthread_mutex_unlock(&g_ev_mu);
    return CUDA_ERROR_INVALID_HANDLE;
  }
  e->refs++; /* a concurrent cuEventDestroy must not free it under us */
  while (e->recorded && !e->done) pthread_cond_wait(&g_ev_cv, &g_ev_mu);
  r = resolve_event_locked(e);
  if (--e->refs == 0) free(e);
  pthread_mutex_unlock(&g_ev_mu);
  return r;
}

FAKE_API CUresult cuEventQuery(CUevent h) {
  CUresult r = fk_check_init();
  if (r) return r;
  pthread_mutex_lock(&g_ev_mu);
  struct fake_event *e = find_event_locked(h);
  if (!e) r = CUDA_ERROR_INVALID_HANDLE;
  else if (e->recorded && !e->done) r = CUDA_ERROR_NOT_READY;
  else r = resolve_event_locked(e);
  pthread_mutex_unlock(&g_ev_mu);
  return r;
}

FAKE_API CUresult cuEventDestroy_v2(CUevent h) {
  CUresult r = fk_check_init();
  if (r) return r;
  pthread_mutex_lock(&g_ev_mu);
  struct fake_event **pp = &g_events;
  while (*pp && *pp != h) pp = &(*pp)->next_live;
  struct fake_event *e = *pp;
  if (e) {
    *pp = e->next_live;
    if (--e->refs == 0) free(e);
  }
  pthread_mutex_unlock(&g_ev_mu);
  return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}
