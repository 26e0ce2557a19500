/*
 * Force-included into the prebuilt binaries only (scripts/build-prebuilds.mjs), which compile
 * against an old glibc's headers (the floor they must load with) but a current GCC's C++ library.
 */
#ifdef __cplusplus
/* This libstdc++ was configured for a newer glibc: keep it off the functions the floor lacks
   (pthread_cond_clockwait and friends, glibc 2.30); it then uses pthread_cond_timedwait. */
#include <bits/c++config.h>
#undef _GLIBCXX_USE_PTHREAD_COND_CLOCKWAIT
#undef _GLIBCXX_USE_PTHREAD_MUTEX_CLOCKLOCK
#undef _GLIBCXX_USE_PTHREAD_RWLOCK_CLOCKLOCK
#endif

/* preadv2 and RWF_NOWAIT (glibc 2.26, Linux 4.14): older headers lack them; the system call is the
   same one glibc makes (on 64-bit targets the offset travels whole, the high half is 0). */
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>
#ifndef RWF_NOWAIT
#define RWF_NOWAIT 0x00000008
static inline ssize_t penstock_preadv2(int fd, const struct iovec* iov, int count, off_t offset, int flags) {
  return syscall(__NR_preadv2, fd, iov, count, offset, 0L, flags);
}
#define preadv2 penstock_preadv2
#endif
