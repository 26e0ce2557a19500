// Batched reads: one operation carrying many byte ranges of one or several files into host or
// device memory. TypeScript plans everything (which ranges share one pread, the order in staging,
// how reads are grouped into tasks); batch_bindings.cc checks the plan and starts it, and the
// tasks here carry it out.
#pragma once
#include <napi.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "cuda_api.h"
#include "errors.h"

namespace penstock {

struct Read {
  int fd = -1;
  uint64_t fileOffset = 0, length = 0;
  uint32_t firstPiece = 0, pieces = 0;
  int64_t directTarget = -1;  // host target the read lands in directly (its pieces are one stretch of it)
  uint64_t directOffset = 0;
};

struct Piece {
  uint64_t at = 0, size = 0;  // where in its read, how much
  uint32_t target = 0;        // < hostCount: host target; else device target (index - hostCount)
  uint64_t targetOffset = 0;
};

struct Task {
  uint32_t firstRead = 0, reads = 0;
  int device = -1;  // -1: host targets only
};
class BatchOp;

struct BatchEvent {
  std::shared_ptr<BatchOp> op;
  bool done;  // false: progress
};

// Main thread: settles the batch, or delivers progress (batch_bindings.cc).
void DeliverBatchEvent(Napi::Env env, Napi::Function, std::nullptr_t*, BatchEvent* event);
using BatchTsfn = Napi::TypedThreadSafeFunction<std::nullptr_t, BatchEvent, DeliverBatchEvent>;

class BatchOp : public std::enable_shared_from_this<BatchOp> {
 public:
  // The plan, checked (plain data only: worker threads read it).
  std::vector<Read> reads;
  std::vector<Piece> pieces;
  std::vector<Task> tasks;
  std::vector<char*> hostBase;
  std::vector<uint64_t> hostLength;
  std::vector<CUdeviceptr> deviceBase;
  std::vector<uint64_t> deviceLength;
  std::vector<int> deviceOrdinal;
  double* pieceBytes = nullptr;  // per piece: bytes that arrived (written by tasks, read after they end)
  bool wantProgress = false;

  // Main thread only.
  Napi::Promise::Deferred* deferred = nullptr;
  Napi::ObjectReference keep;  // the spec: its arrays and the target memory stay alive with it
  Napi::FunctionReference progress;
  BatchTsfn tsfn;
  std::shared_ptr<BatchOp>* hook = nullptr;  // the environment cleanup hook's hold on this batch

  // Queues runners on the pool (one per thread at most); each takes the next task in turn.
  void Start();
  void Cancel() { cancelled_ = true; }
  // Environment teardown: stop, wait for running tasks, forget JS handles.
  void Teardown();
  void Settle(Napi::Env env);
  void DeliverProgress(Napi::Env env);
  bool Torn() const { return torn_; }

 private:
  void RunNext();
  // After the last task: hands the batch to the JS thread, then lets teardown go on.
  void Finished();
  void Post(bool done);
  void AddProgress(uint64_t n);
  void Fail(ErrorRecord e);
  void ReadFailed(uint32_t r, int err);
  // One pread of read `r` into `buf`: the bytes that arrived (short only at end of file), or
  // -1 with the error noted against the read.
  int64_t ReadInto(uint32_t r, char* buf);
  // The bytes of piece `p` among `got` bytes of its read.
  uint64_t Arrived(const Piece& p, int64_t got) const;
  ErrorRecord HostTask(const Task& t);
  ErrorRecord DeviceTask(const Task& t);

  std::atomic<uint32_t> next_{0};
  std::atomic<size_t> remaining_{0};
  std::atomic<bool> cancelled_{false}, failed_{false}, progressPending_{false};
  std::atomic<uint64_t> bytesDone_{0}, lastProgress_{0}, busyNs_{0}, ioNs_{0}, waitNs_{0}, preads_{0}, copies_{0};
  std::mutex errorMutex_;
  ErrorRecord error_;
  std::vector<std::pair<uint32_t, ErrorRecord>> readErrors_;
  std::mutex drainMutex_;
  std::condition_variable drained_;
  bool finished_ = false;  // guarded by drainMutex_
  bool torn_ = false;
};

void RegisterBatch(Napi::Env env, Napi::Object exports);

}  // namespace penstock
