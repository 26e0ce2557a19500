#include "sys/posix_io.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>

namespace penstock {

// Reads until n bytes or end of file. With O_DIRECT a short, unaligned count means end of file;
// asking again at an unaligned offset would only fail.
ssize_t PreadFull(int fd, char* buf, size_t n, uint64_t off, bool direct, int* err) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = pread(fd, buf + got, n - got, static_cast<off_t>(off + got));
    if (r < 0) {
      if (errno == EINTR) continue;
      *err = errno;
      return -1;
    }
    if (r == 0) break;
    got += static_cast<size_t>(r);
    if (direct && (r % kAlign) != 0) break;
  }
  return static_cast<ssize_t>(got);
}

int PwriteFull(int fd, const char* buf, size_t n, uint64_t off) {
  size_t put = 0;
  while (put < n) {
    ssize_t r = pwrite(fd, buf + put, n - put, static_cast<off_t>(off + put));
    if (r < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (r == 0) return EIO;
    put += static_cast<size_t>(r);
  }
  return 0;
}

// Writes [pos, pos+n) whose bytes sit at `data`, where data - (pos % kAlign) is page aligned:
// the aligned interior goes through the O_DIRECT descriptor, the unaligned head and tail through
// the buffered one (they are whole pages nobody else writes directly, so the two never overlap).
int WriteMaybeDirect(int fd, int directFd, const char* data, uint64_t pos, uint64_t n, int* refused) {
  DirectWriteSplit w = SplitDirectWrite(pos, n);
  if (directFd < 0 || !w.HasInterior()) return PwriteFull(fd, data, n, pos);
  if (w.headBytes)
    if (int e = PwriteFull(fd, data, w.headBytes, pos)) return e;
  const char* interior = data + w.headBytes;
  uint64_t interiorBytes = w.interiorEnd - w.interiorStart;
  int e = PwriteFull(directFd, interior, interiorBytes, w.interiorStart);
  if (e == EINVAL) {  // the file system refuses this alignment
    *refused = EINVAL;
    e = PwriteFull(fd, interior, interiorBytes, w.interiorStart);
  }
  if (e) return e;
  if (w.tailBytes) return PwriteFull(fd, interior + interiorBytes, w.tailBytes, w.interiorEnd);
  return 0;
}

// Reads [pos, pos+n) into buf, through O_DIRECT when directFd >= 0 (reading the enclosing aligned
// span, buf needs n + 2*kAlign bytes). Returns where the data starts in buf and how much arrived.
int ReadMaybeDirect(int fd, int directFd, char* buf, uint64_t pos, uint64_t n, char** data, uint64_t* got, int* refused) {
  int err = 0;
  if (directFd >= 0) {
    DirectReadSpan span = EnclosingDirectSpan(pos, n);
    ssize_t r = PreadFull(directFd, buf, span.length, span.start, true, &err);
    if (r >= 0) {
      *data = buf + span.slack;
      *got = RequestedBytesRead(span, n, static_cast<uint64_t>(r));
      return 0;
    }
    if (err != EINVAL) return err;
    // EINVAL: the file system wants another alignment; fall back to buffered for this piece.
    *refused = err;
  }
  ssize_t r = PreadFull(fd, buf, n, pos, false, &err);
  if (r < 0) return err;
  *data = buf;
  *got = static_cast<uint64_t>(r);
  return 0;
}

double Residency(int fd, uint64_t offset, uint64_t length, int samples) {
  // Pages past the end of the file hold nothing to cache: counting them as cold would make a
  // range larger than its file look cold.
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size < 0) return -1;
  uint64_t size = static_cast<uint64_t>(st.st_size);
  if (offset >= size) return -1;
  length = std::min(length, size - offset);
  if (length == 0 || samples <= 0) return -1;
  uint64_t start = AlignDown(offset);
  uint64_t span = AlignUp(offset + length) - start;
  // Mapping without touching costs no I/O; mincore then reads the page cache state.
  void* map = mmap(nullptr, span, PROT_READ, MAP_SHARED, fd, static_cast<off_t>(start));
  if (map == MAP_FAILED) return -1;
  uint64_t pages = span / kAlign;
  int n = static_cast<int>(std::min<uint64_t>(pages, static_cast<uint64_t>(samples)));
  int resident = 0, asked = 0;
  for (int i = 0; i < n; ++i) {
    uint64_t page = pages * i / n;
    unsigned char v = 0;
    if (mincore(static_cast<char*>(map) + page * kAlign, kAlign, &v) != 0) continue;
    ++asked;
    resident += v & 1;
  }
  munmap(map, span);
  return asked ? static_cast<double>(resident) / asked : -1;
}

int DropCache(int fd) { return posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED); }

int PeerCredentials(int fd, int64_t* pid, int64_t* uid, int64_t* gid) {
  struct ucred cred {};
  socklen_t len = sizeof(cred);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return errno;
  if (len != sizeof(cred)) return EPROTO;
  *pid = cred.pid;
  *uid = cred.uid;
  *gid = cred.gid;
  return 0;
}

// Page-aligned scratch for host transfers through O_DIRECT (the user's buffer is rarely aligned).
char* Scratch(size_t n) {
  // Freed when the thread ends: pool workers leave when the pool shrinks.
  struct Block {
    char* p = nullptr;
    size_t size = 0;
    ~Block() { free(p); }
  };
  thread_local Block b;
  if (b.size < n) {
    free(b.p);
    b.p = nullptr;
    b.size = 0;
    if (posix_memalign(reinterpret_cast<void**>(&b.p), kAlign, n) != 0) return nullptr;
    b.size = n;
  }
  return b.p;
}

}  // namespace penstock
