// Unit checks of the io_uring reads (src/native/sys/read_ring.cc) against a temporary file: every
// byte in its place for more requests than the ring holds, short reads at end of file, reads
// past it, a bad descriptor failing its own requests only, one request for more than the file.
// Where io_uring cannot be set up here, the checks say so and pass: the addon then reads by
// pread, which the batch tests cover (and the contract test forces).
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "../../src/native/sys/posix_io.cc"
#include "../../src/native/sys/read_ring.cc"
#include "check.h"

namespace {

using penstock::ReadRing;
using penstock::RingRead;

unsigned char Byte(uint64_t at) { return static_cast<unsigned char>((at * 2654435761u) >> 13); }

}  // namespace

int main() {
  char path[] = "/tmp/penstock-ring-XXXXXX";
  int fd = mkstemp(path);
  EXPECT(fd >= 0);
  const uint64_t size = (1 << 20) + 123;  // not a page multiple: the last read is short
  std::vector<unsigned char> data(size);
  for (uint64_t i = 0; i < size; ++i) data[i] = Byte(i);
  EXPECT(write(fd, data.data(), size) == static_cast<ssize_t>(size));
  unlink(path);

  ReadRing ring;
  int err = ring.Setup(8);
  if (err) {
    std::printf("read_ring_test: io_uring unavailable here (%s); nothing to check\n", strerror(err));
    return check::Finish("read_ring_test");
  }
  EXPECT(ring.Entries() >= 8);

  // 300 reads of 4 KiB at scattered offsets (more than the ring's 8 entries), the last ones
  // crossing and passing end of file, and two on a closed descriptor.
  const size_t n = 300;
  std::vector<char> out(n * 4096, 0x5a);
  std::vector<RingRead> reqs(n);
  for (size_t i = 0; i < n; ++i) {
    uint64_t off = (i * 7919 * 4096 + i * 13) % (size - 100);
    if (i == n - 2) off = size - 100;  // 100 bytes, then end of file
    if (i == n - 1) off = size + 4096;  // past the end: nothing
    reqs[i] = {fd, out.data() + i * 4096, 4096, off};
  }
  int closedFd = open("/dev/null", O_RDONLY);
  close(closedFd);
  reqs[5].fd = closedFd;
  reqs[200].fd = closedFd;
  std::vector<int64_t> got(n, -999);
  EXPECT(ring.ReadAll(reqs.data(), n, got.data()) == 0);
  for (size_t i = 0; i < n; ++i) {
    if (i == 5 || i == 200) {
      EXPECT(got[i] == -EBADF);
      continue;
    }
    uint64_t expect = reqs[i].offset >= size ? 0 : std::min<uint64_t>(4096, size - reqs[i].offset);
    EXPECT(got[i] == static_cast<int64_t>(expect));
    bool same = true;
    for (uint64_t k = 0; k < expect; ++k) same = same && static_cast<unsigned char>(out[i * 4096 + k]) == Byte(reqs[i].offset + k);
    for (uint64_t k = expect; k < 4096; ++k) same = same && out[i * 4096 + k] == 0x5a;  // untouched past what arrived
    EXPECT(same);
  }

  // One request for the whole file and more: all of it, then end of file.
  std::vector<char> whole(size + 4096);
  RingRead all{fd, whole.data(), size + 4096, 0};
  int64_t wholeGot = 0;
  EXPECT(ring.ReadAll(&all, 1, &wholeGot) == 0);
  EXPECT(wholeGot == static_cast<int64_t>(size));
  EXPECT(memcmp(whole.data(), data.data(), size) == 0);

  // Nothing to read: no call, no result.
  EXPECT(ring.ReadAll(nullptr, 0, nullptr) == 0);
  close(fd);
  return check::Finish("read_ring_test");
}
