// What one operation is to do, parsed from JS on the main thread (io_bindings.cc,
// memory_bindings.cc) and read by its tasks: plain data, every number planned in TypeScript.
#pragma once
#include <cstdint>

#include "sys/cuda_api.h"
#include "sys/cufile_api.h"

namespace penstock {

// A transfer between a file and memory, a copy between host memory and a GPU buffer, or a read
// into a GPU of a file's pages kept registered (kept_pages.h).
enum class OpKind { File, CopyToDevice, CopyToHost, KeptRead };
// How a file transfer moves its bytes (OpKind::File only).
enum class Route { PosixHost, PosixDevice, CuFile };

struct OpSpec {
  OpKind kind = OpKind::File;
  Route route = Route::PosixHost;
  bool write = false;
  int fd = -1;
  int directFd = -1;
  uint64_t fileOffset = 0;
  uint64_t size = 0;
  uint64_t taskSize = 0;
  char* host = nullptr;  // host target or source, already offset
  CUdeviceptr dev = 0;   // device target or source, already offset
  int device = -1;
  CUfileHandle_t cufile = nullptr;
  CUdeviceptr cufileBase = 0;
  uint64_t cufileBaseOffset = 0;
  bool wantProgress = false;
  // Every size below is planned in TypeScript (transfer-plan.ts); none has a value of its own here.
  // Host reads through cache-sized scratch and streaming stores, in pieces of this size (0: read
  // straight into the target).
  uint64_t hostStagePiece = 0;
  // Host reads and writes through O_DIRECT: bytes per piece of aligned scratch.
  uint64_t directPiece = 0;
  // Staged device reads and writes: bytes per copy through a bounce half (at most a half).
  uint64_t stagePiece = 0;
  // Buffered writes through cache-sized scratch: host writes in pieces of this size, staged
  // writes piece by piece (0: straight from the source or the bounce buffer).
  uint64_t writePiece = 0;
  // At most this many tasks in flight (0: one per pool thread). Buffered writes into one file
  // serialise on its inode lock, so more writers than a few only wait.
  uint32_t maxRunners = 0;
  // Staged device reads: whether one worker also carries tasks from the range's end by
  // registering the file's page-cache pages with CUDA and copying straight out of them, in
  // pieces of `mappedPiece` bytes, each claim at most 1/`mappedClaimDivisor` of the tasks left.
  // Both ends are claimed until they meet, so the split follows the speeds.
  bool mapped = false;
  uint64_t mappedPiece = 0;
  uint64_t mappedClaimDivisor = 0;
  // Staged buffered reads: preads go into cache-sized scratch in pieces of this size and are
  // streamed into the bounce half with non-temporal stores, so the GPU's copy reads them from
  // memory rather than from lines still dirty in a CPU cache (0: pread into the half).
  uint64_t stageScratch = 0;
  // Staged buffered reads through scratch (stageScratch > 0) that fit the device's gather stage:
  // each task streams its bytes into the stage at its own offset, and the stage goes to the GPU
  // in order, on the stage's one stream, in copies of at least this many bytes as the finished
  // prefix grows, so the copy engine starts early and runs back to back. 0, or the stage taken
  // by another operation: each task copies through its worker's bounce half.
  uint64_t gatherCopy = 0;
  // The stage's streams those copies take turns on (1 to kGatherStreams): copies on different
  // streams run at once, which a single stream's copies, one after another, do not.
  uint32_t gatherStreams = 0;
  // Kept reads (OpKind::KeptRead): the span's id; whether this read registers it first
  // (`keepNew`), refusing a file changed within `keptSettleNs` of now.
  uint32_t keptId = 0;
  bool keepNew = false;
  uint64_t keptSettleNs = 0;
};

}  // namespace penstock
