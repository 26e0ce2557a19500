// A worker's staging pipeline per GPU: which bounce-buffer half holds a copy still in flight,
// and which tasks finish when that copy completes.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "device.h"
#include "errors.h"

namespace penstock {

class Operation;

// Tasks alternate the two bounce halves without waiting for their last copy: a task ends when
// the copy out of its last half is seen to be complete, which overlaps that copy with the next
// task's pread instead of idling on it.
struct Pipe {
  DeviceState* dev = nullptr;
  WorkerSlot* slot = nullptr;
  int nextHalf = 0;
  uint64_t seq = 0;
  uint64_t halfSeq[2] = {0, 0};  // sequence of the last event recorded on each half (0: none)
  struct Waiting {
    std::shared_ptr<Operation> op;
    uint64_t seq;  // complete once the event with this sequence has completed
  };
  std::vector<Waiting> waiting;

  // Completion of event `seq` implies completion of every earlier one (one in-order stream).
  void Complete(uint64_t seq, const ErrorRecord& err);
  // Waits for the half's previous copy before it is overwritten.
  ErrorRecord Reuse(int h);
  // Waits for everything in flight and finishes the waiting tasks.
  void Flush();
  // Finishes the waiting tasks if everything in flight is complete; never waits.
  void Poll();
};

constexpr int kMaxPipes = 64;
// The calling worker's pipeline for GPU `device` (< kMaxPipes).
Pipe& WorkerPipe(int device);
// Settles every pipeline of the calling worker.
void FlushWorkerPipes();
// Finishes the calling worker's waiting tasks whose copies are complete, on every GPU. Run
// before each task, so a task whose last copy went to one GPU is not held back while the
// worker keeps busy with another GPU's reads.
void PollWorkerPipes();

}  // namespace penstock
