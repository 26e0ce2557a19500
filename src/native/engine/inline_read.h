// Small reads on the calling thread from the page cache (inline_read.cc): one preadv2 with
// RWF_NOWAIT, which never waits for the disk, and for a GPU target the pieces of the read
// copied from the device's inline staging. TypeScript decides when to try them and falls back to
// the pool when they do not move every byte.
#pragma once
#include <sys/types.h>

#include <cstdint>

#include "sys/cuda_api.h"
#include "sys/error_record.h"

namespace penstock {

// The most pool workers one read may ask for help, and the most pieces it may be cut into.
constexpr int kMaxCachedHelpers = 64;
constexpr uint64_t kMaxCachedPieces = 1024;

// Bytes read (possibly short), or -errno (-EAGAIN: not all cached).
ssize_t PreadNoWait(int fd, char* data, uint64_t size, uint64_t fileOffset);

// One read into a GPU through its inline staging, as planned in TypeScript: in pieces of `piece`
// bytes, claimed in order by the calling thread and by `helpers` tasks queued to the pool, each
// read straight into the staging or through scratch.
struct CachedDeviceRead {
  int fd = -1;
  int device = 0;
  CUdeviceptr dst = 0;
  uint64_t size = 0, fileOffset = 0, piece = 0;
  int helpers = 0;
  bool throughScratch = false;
};

// The calling thread copies each finished prefix to the GPU on the inline stream as soon as it
// has it, so the copies run under the later preads; every piece and every copy is waited for
// before it returns, whatever the outcome, so nothing of it is in flight when the pool takes over
// a read it could not finish. `*result`: `size` (every byte), a short count, or -errno; -EBUSY
// when another thread is using the device's inline staging (the pool then takes the read).
// `*helped`: the pieces helpers read.
ErrorRecord ReadCachedToDevice(const CachedDeviceRead& read, int64_t* result, uint32_t* helped);

}  // namespace penstock
