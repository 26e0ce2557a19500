/*
 * Test-only fake of libcuda.so.1: stream internals shared by fake_stream.c and fake_event.c.
 *
 * Injected copy failures are reported once, by the first synchronisation that covers them: a
 * cuStreamSynchronize on the stream, or a cuEventSynchronize/cuEventQuery on an event recorded
 * after the failing copy. (The real driver would poison the whole context; the tests need the
 * next operation to work again.) Sequence numbers order failures against synchronisations.
 */
#ifndef PENSTOCK_FAKE_STREAM_H
#define PENSTOCK_FAKE_STREAM_H

#include "fake_internal.h"

#include <pthread.h>

enum item_kind { ITEM_COPY, ITEM_MARKER };

typedef struct item {
  struct item *next;
  enum item_kind kind;
  unsigned long long seq;
  /* ITEM_COPY */
  void *dst;
  const void *src;
  size_t n;
  int fail;
  long long delay_us;
  fake_rec *dev_rec, *host_rec;
  /* ITEM_MARKER */
  struct fake_event *ev;
  unsigned gen;
} item;

struct fake_stream {
  struct fake_stream *next_live;
  pthread_mutex_t mu;
  pthread_cond_t work, idle;
  item *head, *tail;
  int busy, stop, started;
  int non_blocking; /* CU_STREAM_NON_BLOCKING: exempt from the legacy default stream's ordering */
  pthread_t thread;
  unsigned long long seq, fail_seq, reported_seq;
};

/* Stream handle 0 is the default stream; its worker starts when work is first queued on it. */
CUresult fk_stream_for_work(CUstream h, struct fake_stream **out);

void fk_enqueue(struct fake_stream *s, item *it);

/* Queues one host<->device copy on stream h (device_side and host_side name the two ends). */
CUresult fk_async_copy(void *dst, const void *src, size_t n, CUdeviceptr device_side, const void *host_side,
                       CUstream h);

/* A stream worker reached an event's marker; failed is the stream's latest failure then. */
void fk_event_marker_passed(struct fake_event *e, unsigned gen, unsigned long long failed);

/* A destroyed stream's events keep the answer it would have given. */
void fk_events_forget_stream(struct fake_stream *s);

#endif
