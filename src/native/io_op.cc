#include "io_op.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>

#include "device.h"
#include "instance.h"
#include "posix_io.h"
#include "staging_pipe.h"
#include "thread_pool.h"

namespace penstock {

Operation::~Operation() {
  if (map_) munmap(map_, mapSpan_);
}

void Operation::FlushDeferred() { FlushWorkerPipes(); }

void Operation::FinishTask() {
  if (remaining_.fetch_sub(1) == 1) Drained();
}

void Operation::Drained() {
  pinned.reset();
  instance_->TasksDrained(shared_from_this());
}

void Operation::NoteDirectRefused(int err) {
  directFallbackErrno_ = err;
  ++directFallbacks_;
}

void Operation::Start() {
  auto self = shared_from_this();
  uint64_t task = (spec_.route == Route::CopyToDevice || spec_.route == Route::CopyToHost)
                      ? std::max<uint64_t>(spec_.size, 1)
                      : spec_.taskSize;
  uint64_t n = spec_.size == 0 ? 0 : (spec_.size + task - 1) / task;
  tasks_ = n;
  if (n == 0) {
    Drained();
    return;
  }
  taskBytes_ = task;
  cursors_ = n << 32;  // 2^32 tasks would take a buffer of 16 TiB at the smallest task size
  // Runners, not tasks, go in the queue: each takes the operation's next task and then queues
  // itself again at the back. Concurrent operations (one per GPU, say) so share the workers
  // task by task instead of running one after another in submission order.
  ThreadPool& pool = ThreadPool::Instance();
  uint64_t runners = std::min<uint64_t>(n, std::max(1, pool.Size()));
  if (spec_.maxRunners) runners = std::min<uint64_t>(runners, spec_.maxRunners);
  // Submit checked that a mapped share is a staged read with page-aligned tasks.
  uint64_t mapped = 0;
  if (spec_.mappedRunners) {
    ErrorRecord e = MapRange();
    if (e.ok()) {
      mapped = std::min<uint64_t>(spec_.mappedRunners, runners);
    } else {
      mappedError_ = std::move(e);
      mappedFailed_ = true;
    }
  }
  // Each mapped runner holds one count of its own until it has added up its time.
  remaining_ = n + mapped;
  // Mapped runners first: each holds its worker for the whole operation.
  for (uint64_t i = 0; i < mapped; ++i) pool.Submit([self] { self->RunMapped(); });
  for (uint64_t i = mapped; i < runners; ++i) pool.Submit([self] { self->RunNext(); });
}

uint64_t Operation::ClaimFront(uint64_t* got) {
  uint64_t cur = cursors_.load();
  for (;;) {
    uint64_t front = cur & 0xffffffffu, back = cur >> 32;
    if (front >= back) break;
    if (cursors_.compare_exchange_weak(cur, cur + 1)) {
      *got = 1;
      return front;
    }
  }
  *got = 0;
  return 0;
}

uint64_t Operation::ClaimBack(uint64_t count, uint64_t* got) {
  uint64_t cur = cursors_.load();
  for (;;) {
    uint64_t front = cur & 0xffffffffu, back = cur >> 32;
    uint64_t left = back > front ? back - front : 0;
    // At most a quarter of what is left, so the last piece does not keep the read waiting after
    // the staged runners have run dry.
    uint64_t take = std::min(count, std::max<uint64_t>(left / 4, left ? 1 : 0));
    if (take == 0) break;
    if (cursors_.compare_exchange_weak(cur, ((back - take) << 32) | front)) {
      *got = take;
      return back - take;
    }
  }
  *got = 0;
  return 0;
}

void Operation::RunNext() {
  uint64_t got;
  uint64_t i = ClaimFront(&got);
  if (!got) return;
  uint64_t begin = i * taskBytes_;
  uint64_t length = std::min(taskBytes_, spec_.size - begin);
  // Queue the next turn before working, so the queue never runs dry behind a long task (a turn
  // that finds nothing left just ends). An operation limited to a few tasks at once queues it
  // after instead: each runner is then one chain of tasks.
  bool more = i + 1 < tasks_.load();
  auto next = [this] {
    auto self = shared_from_this();
    ThreadPool::Instance().Submit([self] { self->RunNext(); });
  };
  if (more && !spec_.maxRunners) next();
  RunTask(begin, length);
  if (more && spec_.maxRunners) next();
}

void Operation::RunTask(uint64_t begin, uint64_t length) {
  auto t0 = std::chrono::steady_clock::now();
  uint32_t running = ++running_;
  for (uint32_t peak = peakRunning_.load(); running > peak && !peakRunning_.compare_exchange_weak(peak, running);) {
  }
  bool deferred = false;
  if (!cancelled_ && !failed_) {
    uint64_t done = 0;
    ErrorRecord e;
    // Only staged reads continue a worker's pipeline; anything else first settles it.
    if (spec_.route != Route::PosixDevice || spec_.write) FlushWorkerPipes();
    else PollWorkerPipes();
    switch (spec_.route) {
      case Route::PosixHost: e = HostTask(begin, length, &done); break;
      case Route::PosixDevice:
        e = spec_.write ? StagedWriteTask(begin, length, &done) : StagedReadTask(begin, length, &done, &deferred);
        break;
      case Route::CuFile: e = CuFileTask(begin, length, &done); break;
      case Route::CopyToDevice:
      case Route::CopyToHost: e = CopyTask(begin, length); break;
    }
    if (!e.ok()) Fail(std::move(e));
  }
  auto t1 = std::chrono::steady_clock::now();
  busyNs_ += std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count();
  --running_;
  if (!deferred) FinishTask();
}

void Operation::Fail(ErrorRecord e) {
  std::lock_guard<std::mutex> lock(errorMutex_);
  if (failed_) return;
  error_ = std::move(e);
  failed_ = true;
}

void Operation::NoteEof(uint64_t filePos) {
  uint64_t cur = eofAt_.load();
  while (filePos < cur && !eofAt_.compare_exchange_weak(cur, filePos)) {
  }
}

void Operation::AddProgress(uint64_t n) {
  bytesDone_ += n;
  if (spec_.wantProgress && !progressPending_.exchange(true))
    if (!instance_->Post(shared_from_this(), false)) progressPending_ = false;
}

ErrorRecord Operation::CuFileTask(uint64_t begin, uint64_t length, uint64_t* done) {
  DeviceState* d = PreparedDevice(spec_.device);
  if (d) Cuda().CtxSetCurrent(d->ctx);
  const CuFileApi& cf = CuFile();
  for (uint64_t pos = begin; pos < begin + length;) {
    if (cancelled_ || failed_) break;
    uint64_t n = begin + length - pos;
    uint64_t filePos = spec_.fileOffset + pos;
    off_t bufOff = static_cast<off_t>(spec_.cufileBaseOffset + pos);
    void* base = reinterpret_cast<void*>(spec_.cufileBase);
    errno = 0;
    ssize_t r = spec_.write ? cf.Write(spec_.cufile, base, n, static_cast<off_t>(filePos), bufOff)
                            : cf.Read(spec_.cufile, base, n, static_cast<off_t>(filePos), bufOff);
    int savedErrno = errno;
    if (r < 0) {
      IoFailure f = DecodeCuFileIoError(r, savedErrno);
      return f.cufile ? ErrorRecord::FromCuFile(f.code, spec_.write ? "cuFileWrite" : "cuFileRead")
                      : ErrorRecord::Os(f.code, spec_.write ? "cuFileWrite" : "cuFileRead");
    }
    if (r == 0) {
      if (spec_.write) return ErrorRecord::Os(EIO, "cuFileWrite");
      NoteEof(filePos);
      break;
    }
    // Short counts are normal (end of file, or cuFile splitting the request): ask for the rest.
    pos += static_cast<uint64_t>(r);
    *done += static_cast<uint64_t>(r);
    AddProgress(r);
  }
  return {};
}

ErrorRecord Operation::CopyTask(uint64_t begin, uint64_t length) {
  CUcontext ctx;
  ErrorRecord e = RetainContext(spec_.device, &ctx);
  if (!e.ok()) return e;
  const CudaApi& cu = Cuda();
  cu.CtxSetCurrent(ctx);
  CUresult r = spec_.route == Route::CopyToDevice ? cu.MemcpyHtoD(spec_.dev + begin, spec_.host + begin, length)
                                                   : cu.MemcpyDtoH(spec_.host + begin, spec_.dev + begin, length);
  if (r != CUDA_SUCCESS)
    return ErrorRecord::FromCuda(r, spec_.route == Route::CopyToDevice ? "cuMemcpyHtoD" : "cuMemcpyDtoH");
  AddProgress(length);
  return {};
}

void Operation::Settle(Napi::Env env) {
  if (!progress.IsEmpty()) DeliverProgress(env);
  if (!deferred) return;
  SettlePromise(env, deferred, cancelled_, failed_, error_, [&] {
    uint64_t bytes = spec_.size;
    uint64_t eof = eofAt_.load();
    bool hitEof = eof != UINT64_MAX;
    if (hitEof) bytes = std::min<uint64_t>(bytes, eof - spec_.fileOffset);
    Napi::Object result = Napi::Object::New(env);
    result.Set("bytes", static_cast<double>(bytes));
    result.Set("tasks", static_cast<double>(tasks_.load()));
    result.Set("busyNs", static_cast<double>(busyNs_.load()));
    result.Set("ioNs", static_cast<double>(ioNs_.load()));
    result.Set("waitNs", static_cast<double>(waitNs_.load()));
    result.Set("peakTasks", peakRunning_.load());
    if (spec_.mappedRunners) {
      Napi::Object m = Napi::Object::New(env);
      m.Set("tasks", static_cast<double>(mappedTasks_.load()));
      m.Set("bytes", static_cast<double>(mappedBytes_.load()));
      m.Set("busyNs", static_cast<double>(mappedBusyNs_.load()));
      m.Set("ioNs", static_cast<double>(mappedIoNs_.load()));
      m.Set("waitNs", static_cast<double>(mappedWaitNs_.load()));
      std::lock_guard<std::mutex> lock(errorMutex_);
      if (mappedFailed_) m.Set("error", ToJs(env, mappedError_));
      result.Set("mapped", m);
    }
    result.Set("eof", hitEof);
    if (uint64_t pieces = directFallbacks_.load()) {
      Napi::Object f = Napi::Object::New(env);
      f.Set("pieces", static_cast<double>(pieces));
      f.Set("record", ToJs(env, ErrorRecord::Os(directFallbackErrno_.load(), spec_.write ? "pwrite" : "pread")));
      result.Set("directFallback", f);
    }
    return result;
  });
  keepAlive.Reset();
  progress.Reset();
}

void Operation::DeliverProgress(Napi::Env env) {
  progressPending_ = false;
  if (progress.IsEmpty()) return;
  uint64_t now = bytesDone_.load();
  if (now == lastProgress_) return;
  lastProgress_ = now;
  try {
    progress.Call({Napi::Number::New(env, static_cast<double>(now))});
  } catch (const Napi::Error&) {
    // A throwing progress callback must not break the operation; TypeScript wraps callbacks so
    // their errors surface to the user there.
  }
}

void Operation::Abandon() {
  keepAlive.SuppressDestruct();
  progress.SuppressDestruct();
  // Only the C++ handle: the promise itself cannot be settled in an environment going away.
  delete deferred;
  deferred = nullptr;
}

}  // namespace penstock
