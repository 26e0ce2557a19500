// One user-visible operation (a read or write of a byte range, or a buffer copy), split into
// tasks for the pool. Tasks share this plain state; only the main thread touches JS values.
#pragma once
#include <napi.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>

#include "cufile_api.h"
#include "cuda_api.h"
#include "errors.h"

namespace penstock {

enum class Route { PosixHost, PosixDevice, CuFile, CopyToDevice, CopyToHost };

// The "baton": everything a task needs, parsed from JS on the main thread.
struct OpSpec {
  bool write = false;
  Route route = Route::PosixHost;
  int fd = -1;
  int directFd = -1;
  uint64_t fileOffset = 0;
  uint64_t size = 0;
  uint64_t taskSize = 4 << 20;
  char* host = nullptr;  // host target or source, already offset
  CUdeviceptr dev = 0;   // device target or source, already offset
  int device = -1;
  CUfileHandle_t cufile = nullptr;
  CUdeviceptr cufileBase = 0;
  uint64_t cufileBaseOffset = 0;
  bool wantProgress = false;
  bool hostStaging = true;  // host reads through cache-sized scratch and streaming stores
};

class Instance;

class Operation : public std::enable_shared_from_this<Operation> {
 public:
  Operation(Instance* instance, OpSpec spec) : instance_(instance), spec_(spec) {}

  // Queues all tasks on the pool. Main thread.
  void Start();
  void Cancel() { cancelled_ = true; }
  // Environment teardown: forget JS handles without touching the dying environment.
  void Abandon();
  bool Cancelled() const { return cancelled_; }

  // Main thread: settle the Promise, or deliver progress.
  void Settle(Napi::Env env);
  void DeliverProgress(Napi::Env env);

  const OpSpec& spec() const { return spec_; }

  // Counts one task as finished; the last one hands the operation back to the JS thread.
  void FinishTask();
  void Fail(ErrorRecord e);
  // Finishes a worker's staged reads whose copies are still in flight (pool idle hook).
  static void FlushDeferred();
  Napi::Promise::Deferred* deferred = nullptr;
  Napi::ObjectReference keepAlive;  // the JS memory the tasks use
  Napi::FunctionReference progress;

 private:
  void RunNext();
  void RunTask(uint64_t begin, uint64_t length);
  ErrorRecord HostTask(uint64_t begin, uint64_t length, uint64_t* done);
  // May leave its last copy in flight and return *deferred = true: the task then finishes when
  // that copy is known complete (the worker's next use of the buffer half, or when it idles).
  ErrorRecord StagedReadTask(uint64_t begin, uint64_t length, uint64_t* done, bool* deferred);
  ErrorRecord StagedWriteTask(uint64_t begin, uint64_t length, uint64_t* done);
  ErrorRecord CuFileTask(uint64_t begin, uint64_t length, uint64_t* done);
  ErrorRecord CopyTask(uint64_t begin, uint64_t length);
  void NoteEof(uint64_t filePos);
  void AddProgress(uint64_t n);

  Instance* instance_;
  OpSpec spec_;
  std::atomic<uint64_t> remaining_{0};
  std::atomic<uint64_t> tasks_{0};
  std::atomic<uint64_t> nextTask_{0};
  uint64_t taskBytes_ = 0;
  std::atomic<uint64_t> bytesDone_{0};
  std::atomic<uint64_t> busyNs_{0};
  std::atomic<uint64_t> eofAt_{UINT64_MAX};
  std::atomic<bool> cancelled_{false};
  std::atomic<bool> failed_{false};
  std::atomic<bool> progressPending_{false};
  std::atomic<uint64_t> lastProgress_{0};
  std::mutex errorMutex_;
  ErrorRecord error_;
};

}  // namespace penstock
