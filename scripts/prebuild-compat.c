/*
 * Linked into the prebuilt binaries only (scripts/build-prebuilds.mjs). GCC's static libstdc++
 * was built against a newer glibc than the binaries' floor and refers to a few of its symbols;
 * these hidden definitions stand in for them so that the binary needs none of them.
 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#define HIDDEN __attribute__((visibility("hidden")))

/* glibc 2.32: lets libstdc++ skip atomic reference counts in a single-threaded process.
   0 says "threads may exist": always atomic, which is always correct. */
HIDDEN char __libc_single_threaded = 0;

/* Fills buf from the kernel's random source: getrandom(2), else /dev/urandom. */
static void fill_random(void* buf, size_t len) {
  unsigned char* p = (unsigned char*)buf;
  while (len > 0) {
    long r = syscall(__NR_getrandom, p, len, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    p += r;
    len -= (size_t)r;
  }
  if (len == 0) return;
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  while (fd >= 0 && len > 0) {
    ssize_t r = read(fd, p, len);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    p += r;
    len -= (size_t)r;
  }
  if (fd >= 0) close(fd);
  if (len != 0) abort(); /* no random source at all: never hand out predictable bytes */
}

/* glibc 2.36: one of std::random_device's sources. */
HIDDEN uint32_t arc4random(void) {
  uint32_t v;
  fill_random(&v, sizeof v);
  return v;
}

/* glibc 2.25: another of std::random_device's sources. */
HIDDEN int getentropy(void* buf, size_t len) {
  if (len > 256) {
    errno = EIO;
    return -1;
  }
  fill_random(buf, len);
  return 0;
}
