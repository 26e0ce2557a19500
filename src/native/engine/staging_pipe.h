// A worker's staging pipeline per GPU: the CUDA side of StagingSequence (staging_sequence.h).
// Tasks alternate the two bounce halves without waiting for their last copy: a task ends when
// the copy out of its last half is seen to be complete, which overlaps that copy with the next
// task's pread instead of idling on it.
#pragma once
#include <memory>

#include "engine/device.h"
#include "sys/error_record.h"
#include "engine/staging_sequence.h"

namespace penstock {

class Job;

struct Pipe {
  // Whose stream and events carry the copies in flight (null: nothing in flight).
  WorkerSlot* slot = nullptr;
  StagingSequence<std::shared_ptr<Job>> sequence;

  // Waits for the half's copy in flight before the half is overwritten.
  ErrorRecord Reuse(int h);
  // Waits for everything in flight and finishes the waiting tasks.
  void Flush();
  // Finishes the waiting tasks if everything in flight is complete; never waits.
  void Poll();
};

constexpr int kMaxPipes = 64;
// The calling worker's pipeline for GPU `device` (< kMaxPipes).
Pipe& WorkerPipe(int device);
// Settles every pipeline of the calling worker (also the pool's idle hook: work a worker left
// in flight is finished before it sleeps).
void FlushWorkerPipes();
// Finishes the calling worker's waiting tasks whose copies are complete, on every GPU. Run
// before each task, so a task whose last copy went to one GPU is not held back while the
// worker keeps busy with another GPU's reads.
void PollWorkerPipes();

}  // namespace penstock
