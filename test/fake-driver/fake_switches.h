/* Switches shared by both fake libraries (each compiles its own copy; nothing is exported). */
#pragma once
#include <pthread.h>

/* Environment switches are read on every call: tests flip them at run time through process.env. */
long long fake_env_ll(const char *name, long long dflt);

/* "Fail after N calls" injection. The count restarts whenever the variable's value changes, so a
   test arms it afresh (any suffix after ':' just makes the value new) without reaching into the
   library. */
typedef struct {
  pthread_mutex_t mu;
  char seen[64];
  int was_set;
  long long count;
} fake_inject;
#define FAKE_INJECT_INIT {PTHREAD_MUTEX_INITIALIZER, "", 0, 0}

/* Counts one call under `var`'s injection; nonzero when this call must fail. */
int fake_inject_should_fail(fake_inject *st, const char *var);
void fake_inject_reset(fake_inject *st);
