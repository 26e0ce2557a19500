// What the routes of a file transfer share, and the staged route's start and drain (its mapped
// runner and its gathered read).
#include "engine/file_tasks.h"

#include "engine/device.h"
#include "engine/mapped_read.h"
#include "engine/staging_pipe.h"
#include "sys/thread_pool.h"

namespace penstock {

void FileTasks::NoteEof(uint64_t filePos) {
  uint64_t cur = eofAt_.load();
  while (filePos < cur && !eofAt_.compare_exchange_weak(cur, filePos)) {
  }
}

uint64_t FileTasks::BytesMoved() const {
  uint64_t eof = eofAt_.load();
  return eof == UINT64_MAX ? file_.size : std::min<uint64_t>(file_.size, eof - file_.fileOffset);
}

void FileTasks::NoteDirectRefused(int err) {
  directFallbackErrno_ = err;
  ++directFallbacks_;
}

ErrorRecord FileTasks::DirectFallbackRecord() const {
  return ErrorRecord::Os(directFallbackErrno_.load(), file_.write ? "pwrite" : "pread");
}

StagedTransfer::StagedTransfer(const StagedSpec& spec) : FileTasks(spec.file), spec_(spec) {}

StagedTransfer::~StagedTransfer() = default;

uint64_t StagedTransfer::Starting(uint64_t runners) {
  tasks_ = TaskCount();
  if (spec_.gatherCopy && !file_.write) TakeGather();
  if (!spec_.mapped) return 0;
  // The bindings checked that a mapped share is a read with page-aligned tasks.
  mapped_ = std::make_unique<MappedRunner>(spec_);
  if (!mapped_->Ready()) return 0;
  // First in the queue: it holds its worker for the whole job, and takes the place of one
  // staged runner.
  auto hold = std::make_shared<DrainHold>(job().Hold());
  Job* job = &this->job();
  MappedRunner* runner = mapped_.get();
  auto self = job->shared_from_this();
  ThreadPool::Instance().Submit([self, runner, hold] { runner->Run(*self, std::move(*hold)); });
  return 1;
}

ErrorRecord StagedTransfer::Run(uint64_t index, uint64_t* done, bool* leftInFlight) {
  uint64_t begin = TaskBegin(index), length = TaskLength(index);
  // Only staged reads continue a worker's pipeline; anything else first settles it.
  if (file_.write) {
    FlushWorkerPipes();
    return WriteTask(begin, length, done);
  }
  PollWorkerPipes();
  if (gather_) return GatheredReadTask(index, begin, length, done);
  return ReadTask(begin, length, done, leftInFlight);
}

void StagedTransfer::Drained() {
  if (gather_) FinishGather();
}

}  // namespace penstock
