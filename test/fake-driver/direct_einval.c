/* Test-only preload: every pread/pwrite on a descriptor opened with O_DIRECT fails with EINVAL,
   as on a file system that wants another alignment than penstock's, so the fallback to buffered
   I/O and its record can be tested. Descriptors without O_DIRECT are not affected. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/types.h>
#include <unistd.h>

#define FAKE_API __attribute__((visibility("default")))

static int is_direct(int fd) {
  int saved = errno;
  int flags = fcntl(fd, F_GETFL);
  errno = saved;
  return flags != -1 && (flags & O_DIRECT);
}

#define WRAP(name, ret, buftype)                                                  \
  FAKE_API ret name(int fd, buftype buf, size_t n, off_t off) {                 \
    static ret (*real)(int, buftype, size_t, off_t);                            \
    if (!real) real = (ret(*)(int, buftype, size_t, off_t))dlsym(RTLD_NEXT, #name); \
    if (is_direct(fd)) {                                                        \
      errno = EINVAL;                                                           \
      return -1;                                                                \
    }                                                                           \
    return real(fd, buf, n, off);                                               \
  }

WRAP(pread, ssize_t, void *)
WRAP(pread64, ssize_t, void *)
WRAP(pwrite, ssize_t, const void *)
WRAP(pwrite64, ssize_t, const void *)
