#include "fake_switches.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

long long fake_env_ll(const char *name, long long dflt) {
  const char *v = getenv(name);
  if (!v || !*v) return dflt;
  /* The callers' errno is the caller's business (cuFileRead reports through it). */
  int saved = errno;
  char *end;
  errno = 0;
  long long x = strtoll(v, &end, 10);
  int bad = errno || *end;
  errno = saved;
  return bad ? dflt : x;
}

int fake_inject_should_fail(fake_inject *st, const char *var) {
  const char *v = getenv(var);
  char now[sizeof st->seen] = "";
  if (v) snprintf(now, sizeof now, "%s", v);
  char *end = now;
  long long after = v && *v ? strtoll(now, &end, 10) : -1;
  if (end == now || (*end && *end != ':')) after = -1;
  pthread_mutex_lock(&st->mu);
  if ((v != NULL) != st->was_set || strcmp(now, st->seen) != 0) {
    st->was_set = v != NULL;
    memcpy(st->seen, now, sizeof now);
    st->count = 0;
  }
  long long index = st->count++;
  pthread_mutex_unlock(&st->mu);
  return after >= 0 && index >= after;
}

void fake_inject_reset(fake_inject *st) {
  pthread_mutex_lock(&st->mu);
  st->count = 0;
  pthread_mutex_unlock(&st->mu);
}
