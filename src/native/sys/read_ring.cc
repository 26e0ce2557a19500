#include "sys/read_ring.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sys/posix_io.h"

#if __has_include(<linux/io_uring.h>) && defined(__NR_io_uring_setup)
#include <linux/io_uring.h>
#define PENSTOCK_HAVE_IO_URING 1
#endif

namespace penstock {

#ifdef PENSTOCK_HAVE_IO_URING

namespace {

template <typename T>
T* At(void* base, uint32_t offset) {
  return reinterpret_cast<T*>(static_cast<char*>(base) + offset);
}

}  // namespace

ReadRing::~ReadRing() {
  if (sqeMap_) munmap(sqeMap_, sqeMapSize_);
  if (cqMap_ && cqMap_ != sqMap_) munmap(cqMap_, cqMapSize_);
  if (sqMap_) munmap(sqMap_, sqMapSize_);
  if (fd_ >= 0) close(fd_);
}

int ReadRing::Setup(unsigned entries) {
  io_uring_params p;
  memset(&p, 0, sizeof(p));
  int fd = static_cast<int>(syscall(__NR_io_uring_setup, entries, &p));
  if (fd < 0) return errno;
  fd_ = fd;
  entries_ = p.sq_entries;
  sqMapSize_ = p.sq_off.array + p.sq_entries * sizeof(unsigned);
  cqMapSize_ = p.cq_off.cqes + p.cq_entries * sizeof(io_uring_cqe);
  bool single = p.features & IORING_FEAT_SINGLE_MMAP;
  if (single) sqMapSize_ = cqMapSize_ = std::max(sqMapSize_, cqMapSize_);
  sqMap_ = mmap(nullptr, sqMapSize_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, IORING_OFF_SQ_RING);
  if (sqMap_ == MAP_FAILED) return (sqMap_ = nullptr, errno);
  if (single) {
    cqMap_ = sqMap_;
  } else {
    cqMap_ = mmap(nullptr, cqMapSize_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, IORING_OFF_CQ_RING);
    if (cqMap_ == MAP_FAILED) return (cqMap_ = nullptr, errno);
  }
  sqeMapSize_ = p.sq_entries * sizeof(io_uring_sqe);
  sqeMap_ = mmap(nullptr, sqeMapSize_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, IORING_OFF_SQES);
  if (sqeMap_ == MAP_FAILED) return (sqeMap_ = nullptr, errno);
  sqHead_ = At<unsigned>(sqMap_, p.sq_off.head);
  sqTail_ = At<unsigned>(sqMap_, p.sq_off.tail);
  sqMask_ = At<unsigned>(sqMap_, p.sq_off.ring_mask);
  sqArray_ = At<unsigned>(sqMap_, p.sq_off.array);
  cqHead_ = At<unsigned>(cqMap_, p.cq_off.head);
  cqTail_ = At<unsigned>(cqMap_, p.cq_off.tail);
  cqMask_ = At<unsigned>(cqMap_, p.cq_off.ring_mask);
  cqes_ = At<void>(cqMap_, p.cq_off.cqes);
  sqes_ = sqeMap_;
  return 0;
}

// Hands `count` queued entries to the kernel; *submitted counts those it took. Cached pages are
// read during the call, so their completions are posted when it returns.
int ReadRing::Submit(unsigned count, size_t* submitted, unsigned* inFlight) {
  while (count > 0) {
    long r = syscall(__NR_io_uring_enter, fd_, count, 0, 0, nullptr, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return r < 0 ? errno : EAGAIN;
    count -= static_cast<unsigned>(r);
    *submitted += static_cast<size_t>(r);
    *inFlight += static_cast<unsigned>(r);
  }
  return 0;
}

void ReadRing::Reap(int64_t* results, unsigned* inFlight) {
  auto* cqes = static_cast<io_uring_cqe*>(cqes_);
  unsigned head = __atomic_load_n(cqHead_, __ATOMIC_RELAXED);
  unsigned tail = __atomic_load_n(cqTail_, __ATOMIC_ACQUIRE);
  for (; head != tail; ++head) {
    const io_uring_cqe& c = cqes[head & *cqMask_];
    results[c.user_data] = c.res;
    --*inFlight;
  }
  __atomic_store_n(cqHead_, head, __ATOMIC_RELEASE);
}

int ReadRing::ReadAll(const RingRead* reqs, size_t n, int64_t* results) {
  auto* sqes = static_cast<io_uring_sqe*>(sqes_);
  int failure = 0;
  size_t queued = 0;     // requests written to the submission ring
  size_t submitted = 0;  // of them, taken by the kernel (always a prefix)
  unsigned inFlight = 0;
  while ((queued < n && !failure) || inFlight > 0) {
    if (queued < n && !failure) {
      // Queue what fits beside the requests still in flight (a completion slot for each).
      unsigned tail = __atomic_load_n(sqTail_, __ATOMIC_RELAXED);
      unsigned count = 0;
      for (; count < entries_ - inFlight && queued < n; ++count, ++queued) {
        unsigned idx = (tail + count) & *sqMask_;
        io_uring_sqe& e = sqes[idx];
        memset(&e, 0, sizeof(e));
        e.opcode = IORING_OP_READ;
        e.fd = reqs[queued].fd;
        e.addr = reinterpret_cast<uint64_t>(reqs[queued].buf);
        // At most what one read(2) reads; the rest is finished below, as a short read.
        e.len = static_cast<uint32_t>(std::min<uint64_t>(reqs[queued].length, 0x7ffff000u));
        e.off = reqs[queued].offset;
        e.user_data = queued;
        sqArray_[idx] = idx;
      }
      __atomic_store_n(sqTail_, tail + count, __ATOMIC_RELEASE);
      if (int e = Submit(count, &submitted, &inFlight)) {
        // What the kernel did not take is taken back and read by pread below.
        failure = e;
        __atomic_store_n(sqTail_, __atomic_load_n(sqHead_, __ATOMIC_ACQUIRE), __ATOMIC_RELEASE);
        queued = submitted;
      }
    }
    Reap(results, &inFlight);
    if (inFlight > 0) {
      // Nothing in flight may outlive this call: its completion writes into the caller's memory.
      // A wait the kernel refuses becomes a poll of the completion ring (completions still come).
      long r = syscall(__NR_io_uring_enter, fd_, 0, 1, IORING_ENTER_GETEVENTS, nullptr, 0);
      if (r < 0 && errno != EINTR && errno != EAGAIN && errno != EBUSY) {
        if (!failure) failure = errno;
        sched_yield();
      }
      Reap(results, &inFlight);
    }
  }
  // Reads the kernel never took, asked to retry, or cut short finish by pread, as PreadFull does
  // (a short read is end of file only once a read returns 0).
  for (size_t i = 0; i < n; ++i) {
    int64_t done = i < submitted ? results[i] : 0;
    if (done == -EAGAIN || done == -EINTR) done = 0;
    bool finished = done < 0 || static_cast<uint64_t>(done) >= reqs[i].length || (i < submitted && results[i] == 0);
    if (!finished) {
      int err = 0;
      ssize_t more = PreadFull(reqs[i].fd, reqs[i].buf + done, reqs[i].length - done, reqs[i].offset + done, false, &err);
      done = more < 0 ? -err : done + more;
    }
    results[i] = done;
  }
  return failure;
}

ReadRing* ThreadRing(unsigned entries, int* err) {
  thread_local std::unique_ptr<ReadRing> ring;
  thread_local unsigned failedEntries = 0;
  thread_local int failedErr = 0;
  if (ring && ring->Entries() >= entries) return ring.get();
  if (failedEntries == entries) {
    *err = failedErr;
    return nullptr;
  }
  auto fresh = std::make_unique<ReadRing>();
  if (int e = fresh->Setup(entries)) {
    failedEntries = entries;
    failedErr = e;
    *err = e;
    return nullptr;
  }
  ring = std::move(fresh);
  return ring.get();
}

#else

ReadRing::~ReadRing() = default;
int ReadRing::Setup(unsigned) { return ENOSYS; }
int ReadRing::ReadAll(const RingRead*, size_t, int64_t*) { return ENOSYS; }
ReadRing* ThreadRing(unsigned, int* err) {
  *err = ENOSYS;
  return nullptr;
}

#endif

}  // namespace penstock
