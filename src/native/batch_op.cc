// Batched reads. A batch is a list of reads (one pread each: a file, an offset, a length) and,
// per read, the pieces of it that go to targets (an offset in the read, a size, a target and an
// offset there). Tasks are runs of reads; runners take tasks in turn on the shared pool.
//
// Host tasks pread straight into the target where the plan says the read is exactly one
// contiguous stretch of it, and otherwise through per-thread scratch. Device tasks gather their
// reads into the worker's pinned bounce halves one after another and copy each half to the GPU
// with as few copies as the targets allow: pieces next to each other both in staging and on the
// GPU go in one copy, so ranges ordered by target address (as the plan orders them) become one
// copy per half. While one half is copied, the next is filled.
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "batch_op.h"
#include "device.h"
#include "errors.h"
#include "host_view.h"
#include "posix_io.h"
#include "staging_pipe.h"
#include "thread_pool.h"

namespace penstock {

namespace {

uint64_t NowNs() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

// The calling worker's bounce buffer and stream for a prepared device (nullptr if it has none).
WorkerSlot* SlotFor(DeviceState* d, int worker) {
  if (!d || worker < 0 || worker >= static_cast<int>(d->slots.size())) return nullptr;
  return &d->slots[worker];
}

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
  bool done;
};

void Deliver(Napi::Env env, Napi::Function, std::nullptr_t*, BatchEvent* event);
using BatchTsfn = Napi::TypedThreadSafeFunction<std::nullptr_t, BatchEvent, Deliver>;

class BatchOp : public std::enable_shared_from_this<BatchOp> {
 public:
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

  Napi::Promise::Deferred* deferred = nullptr;
  Napi::ObjectReference keep;  // the spec: its arrays and the target memory stay alive with it
  Napi::FunctionReference progress;
  BatchTsfn tsfn;
  std::shared_ptr<BatchOp>* hook = nullptr;  // the environment cleanup hook's hold on this batch

  void Start() {
    remaining_ = tasks.size();
    if (tasks.empty()) {
      Post(true);
      return;
    }
    ThreadPool& pool = ThreadPool::Instance();
    size_t runners = std::min<size_t>(tasks.size(), static_cast<size_t>(std::max(1, pool.Size())));
    auto self = shared_from_this();
    for (size_t i = 0; i < runners; ++i) pool.Submit([self] { self->RunNext(); });
  }

  void Cancel() { cancelled_ = true; }

  // Environment teardown: stop, wait for running tasks, forget JS handles.
  void Teardown() {
    cancelled_ = true;
    std::unique_lock<std::mutex> lock(drainMutex_);
    drained_.wait(lock, [&] { return remaining_.load() == 0; });
    keep.SuppressDestruct();
    progress.SuppressDestruct();
    deferred = nullptr;
    torn_ = true;
  }

  void Settle(Napi::Env env);
  void DeliverProgress(Napi::Env env);
  bool Torn() const { return torn_; }

 private:
  void RunNext() {
    uint32_t i = next_.fetch_add(1);
    if (i >= tasks.size()) return;
    // Queue the next turn first, so the runner rejoins behind other operations' runners.
    if (i + 1 < tasks.size()) {
      auto self = shared_from_this();
      ThreadPool::Instance().Submit([self] { self->RunNext(); });
    }
    uint64_t t0 = NowNs();
    if (!cancelled_ && !failed_) {
      ErrorRecord e = tasks[i].device < 0 ? HostTask(tasks[i]) : DeviceTask(tasks[i]);
      if (!e.ok()) Fail(std::move(e));
    }
    busyNs_ += NowNs() - t0;
    if (remaining_.fetch_sub(1) == 1) {
      {
        std::lock_guard<std::mutex> lock(drainMutex_);
      }
      drained_.notify_all();
      Post(true);
    }
  }

  void Post(bool done) {
    auto* ev = new BatchEvent{shared_from_this(), done};
    if (tsfn.NonBlockingCall(ev) != napi_ok) delete ev;
  }

  void AddProgress(uint64_t n) {
    bytesDone_ += n;
    if (wantProgress && !progressPending_.exchange(true)) Post(false);
  }

  void Fail(ErrorRecord e) {
    std::lock_guard<std::mutex> lock(errorMutex_);
    if (failed_) return;
    error_ = std::move(e);
    failed_ = true;
  }

  void ReadFailed(uint32_t r, int err) {
    std::lock_guard<std::mutex> lock(errorMutex_);
    readErrors_.push_back({r, ErrorRecord::Os(err, "pread")});
  }

  // One pread of read `r` into `buf`: the bytes that arrived (short only at end of file), or
  // -1 with the error noted against the read.
  int64_t ReadInto(uint32_t r, char* buf) {
    const Read& rd = reads[r];
    int err = 0;
    ssize_t got;
    {
      uint64_t t0 = NowNs();
      got = PreadFull(rd.fd, buf, rd.length, rd.fileOffset, false, &err);
      ioNs_ += NowNs() - t0;
    }
    ++preads_;
    if (got < 0) {
      ReadFailed(r, err);
      return -1;
    }
    return got;
  }

  // The bytes of piece `p` among `got` bytes of its read.
  uint64_t Arrived(const Piece& p, int64_t got) const {
    if (got <= 0 || static_cast<uint64_t>(got) <= p.at) return 0;
    return std::min<uint64_t>(p.size, static_cast<uint64_t>(got) - p.at);
  }

  ErrorRecord HostTask(const Task& t) {
    for (uint32_t r = t.firstRead; r < t.firstRead + t.reads; ++r) {
      if (cancelled_ || failed_) break;
      const Read& rd = reads[r];
      int64_t got;
      if (rd.directTarget >= 0) {
        got = ReadInto(r, hostBase[rd.directTarget] + rd.directOffset);
      } else {
        char* scratch = Scratch(rd.length);
        if (!scratch) return ErrorRecord::Os(ENOMEM, "posix_memalign");
        got = ReadInto(r, scratch);
        for (uint32_t k = rd.firstPiece; k < rd.firstPiece + rd.pieces; ++k) {
          const Piece& p = pieces[k];
          uint64_t n = Arrived(p, got);
          if (n) memcpy(hostBase[p.target] + p.targetOffset, scratch + p.at, n);
        }
      }
      uint64_t moved = 0;
      for (uint32_t k = rd.firstPiece; k < rd.firstPiece + rd.pieces; ++k) {
        uint64_t n = Arrived(pieces[k], got);
        pieceBytes[k] = static_cast<double>(n);
        moved += n;
      }
      if (moved) AddProgress(moved);
    }
    return {};
  }

  struct Copy {
    const char* src;
    CUdeviceptr dst;
    uint64_t n;
  };

  ErrorRecord DeviceTask(const Task& t) {
    int ordinal = t.device;
    DeviceState* d = PreparedDevice(ordinal);
    WorkerSlot* slot = SlotFor(d, ThreadPool::WorkerIndex());
    if (!slot) return ErrorRecord::Misuse("ERR_PENSTOCK_INTERNAL", "device not prepared for this worker");
    // The bounce halves are this task's until it returns: settle what the worker's staged reads
    // left in flight in them first, and leave nothing in flight after.
    FlushWorkerPipes();
    const CudaApi& cu = Cuda();
    cu.CtxSetCurrent(d->ctx);
    std::vector<Copy> copies;
    uint64_t halfBytes[2] = {0, 0};  // bytes landing on the GPU when each half's copies complete
    bool pending[2] = {false, false};
    int h = 0;
    uint64_t fill = 0;
    ErrorRecord err;
    auto wait = [&](int half) -> ErrorRecord {
      if (!pending[half]) return {};
      uint64_t t0 = NowNs();
      CUresult r = cu.EventSynchronize(slot->events[half]);
      waitNs_ += NowNs() - t0;
      pending[half] = false;
      if (r != CUDA_SUCCESS) return ErrorRecord::FromCuda(r, "cuEventSynchronize");
      if (halfBytes[half]) AddProgress(halfBytes[half]);
      halfBytes[half] = 0;
      return {};
    };
    auto flush = [&]() -> ErrorRecord {  // issues the current half's copies
      for (const Copy& c : copies) {
        CUresult r = cu.MemcpyHtoDAsync(c.dst, c.src, c.n, slot->stream);
        if (r != CUDA_SUCCESS) return ErrorRecord::FromCuda(r, "cuMemcpyHtoDAsync");
        ++copies_;
      }
      if (!copies.empty()) {
        CUresult r = cu.EventRecord(slot->events[h], slot->stream);
        if (r != CUDA_SUCCESS) return ErrorRecord::FromCuda(r, "cuEventRecord");
        pending[h] = true;
      }
      copies.clear();
      return {};
    };
    for (uint32_t r = t.firstRead; r < t.firstRead + t.reads && err.ok(); ++r) {
      if (cancelled_ || failed_) break;
      const Read& rd = reads[r];
      if (fill + rd.length > slot->half) {
        if (!(err = flush()).ok()) break;
        h ^= 1;
        fill = 0;
        if (!(err = wait(h)).ok()) break;
      }
      char* at = slot->bounce + h * slot->stride + fill;
      int64_t got = ReadInto(r, at);
      for (uint32_t k = rd.firstPiece; k < rd.firstPiece + rd.pieces; ++k) {
        const Piece& p = pieces[k];
        uint64_t n = Arrived(p, got);
        pieceBytes[k] = static_cast<double>(n);
        if (!n) continue;
        const char* src = at + p.at;
        CUdeviceptr dst = deviceBase[p.target - hostBase.size()] + p.targetOffset;
        Copy* last = copies.empty() ? nullptr : &copies.back();
        if (last && last->src + last->n == src && last->dst + last->n == dst) last->n += n;
        else copies.push_back({src, dst, n});
        halfBytes[h] += n;
      }
      fill += rd.length;
    }
    if (err.ok()) err = flush();
    // Nothing of this task may stay in flight: the halves go back to the worker's staged reads.
    ErrorRecord e0 = wait(0), e1 = wait(1);
    if (err.ok()) err = !e0.ok() ? e0 : e1;
    if (!err.ok()) cu.StreamSynchronize(slot->stream);
    return err;
  }

  std::atomic<uint32_t> next_{0};
  std::atomic<size_t> remaining_{0};
  std::atomic<bool> cancelled_{false}, failed_{false}, progressPending_{false};
  std::atomic<uint64_t> bytesDone_{0}, lastProgress_{0}, busyNs_{0}, ioNs_{0}, waitNs_{0}, preads_{0}, copies_{0};
  std::mutex errorMutex_;
  ErrorRecord error_;
  std::vector<std::pair<uint32_t, ErrorRecord>> readErrors_;
  std::mutex drainMutex_;
  std::condition_variable drained_;
  bool torn_ = false;
};

void BatchOp::DeliverProgress(Napi::Env env) {
  progressPending_ = false;
  if (progress.IsEmpty()) return;
  uint64_t now = bytesDone_.load();
  if (now == lastProgress_) return;
  lastProgress_ = now;
  try {
    progress.Call({Napi::Number::New(env, static_cast<double>(now))});
  } catch (const Napi::Error&) {
    // TypeScript wraps the callback; nothing of it may break the batch.
  }
}

void BatchOp::Settle(Napi::Env env) {
  if (!progress.IsEmpty()) DeliverProgress(env);
  if (!deferred) return;
  if (cancelled_) {
    deferred->Reject(ToJs(env, ErrorRecord::Aborted()));
  } else if (failed_) {
    deferred->Reject(ToJs(env, error_));
  } else {
    Napi::Object result = Napi::Object::New(env);
    result.Set("preads", static_cast<double>(preads_.load()));
    result.Set("copies", static_cast<double>(copies_.load()));
    result.Set("busyNs", static_cast<double>(busyNs_.load()));
    result.Set("ioNs", static_cast<double>(ioNs_.load()));
    result.Set("waitNs", static_cast<double>(waitNs_.load()));
    Napi::Array errors = Napi::Array::New(env, readErrors_.size());
    for (size_t i = 0; i < readErrors_.size(); ++i) {
      Napi::Object e = Napi::Object::New(env);
      e.Set("read", readErrors_[i].first);
      e.Set("error", ToJs(env, readErrors_[i].second));
      errors.Set(static_cast<uint32_t>(i), e);
    }
    result.Set("readErrors", errors);
    deferred->Resolve(result);
  }
  delete deferred;
  deferred = nullptr;
  keep.Reset();
  progress.Reset();
}

// One cleanup hook per live batch: environment teardown waits for its running tasks.
void TeardownHook(void* arg) {
  auto* holder = static_cast<std::shared_ptr<BatchOp>*>(arg);
  (*holder)->Teardown();
  (*holder)->tsfn.Abort();
}

void Deliver(Napi::Env env, Napi::Function, std::nullptr_t*, BatchEvent* event) {
  std::unique_ptr<BatchEvent> ev(event);
  if (env == nullptr || ev->op->Torn()) return;
  try {
    Napi::HandleScope scope(env);
    if (!ev->done) {
      ev->op->DeliverProgress(env);
      return;
    }
    ev->op->Settle(env);
  } catch (const Napi::Error&) {
    // An environment that is going away refuses to run JS; nothing can be reported to it.
  }
  if (ev->done) {
    // Settled: the teardown hook and the completion channel are no longer needed.
    BatchOp* op = ev->op.get();
    std::shared_ptr<BatchOp>* holder = op->hook;
    op->hook = nullptr;
    op->tsfn.Release();
    if (holder) {
      napi_remove_env_cleanup_hook(env, TeardownHook, holder);
      delete holder;
    }
  }
}

// A typed array of the expected kind, as a pointer and an element count.
template <typename T>
std::pair<const T*, size_t> Typed(const Napi::Value& v, napi_typedarray_type type, const char* name) {
  bool is = false;
  if (napi_is_typedarray(v.Env(), v, &is) != napi_ok || !is) ThrowBadArgument(v.Env(), std::string(name) + " must be a typed array");
  napi_typedarray_type got;
  size_t count = 0, offset = 0;
  void* data = nullptr;
  napi_value ab;
  if (napi_get_typedarray_info(v.Env(), v, &got, &count, &data, &ab, &offset) != napi_ok || got != type)
    ThrowBadArgument(v.Env(), std::string(name) + " has the wrong element type");
  return {static_cast<const T*>(data), count};
}

// A field of a Float64Array record: an integer in [lo, 2^53).
uint64_t Whole(Napi::Env env, double d, double lo, const char* name) {
  if (!(d >= lo) || d > 9007199254740991.0 || static_cast<double>(static_cast<int64_t>(d)) != d)
    ThrowBadArgument(env, std::string("batch ") + name + " out of range");
  return static_cast<uint64_t>(static_cast<int64_t>(d));
}

// submitBatch(spec) → { promise, cancel }. The spec is plain data built by batch-read.ts; every
// index and length in it is checked here again, so no plan can make a task touch memory
// outside its targets.
Napi::Value SubmitBatch(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() != 1 || !info[0].IsObject()) ThrowBadArgument(env, "submitBatch(spec)");
  Napi::Object s = info[0].As<Napi::Object>();
  auto op = std::make_shared<BatchOp>();

  auto fds = Typed<int32_t>(s.Get("fds"), napi_int32_array, "fds");
  auto reads = Typed<double>(s.Get("reads"), napi_float64_array, "reads");
  auto pieces = Typed<double>(s.Get("pieces"), napi_float64_array, "pieces");
  auto tasks = Typed<double>(s.Get("tasks"), napi_float64_array, "tasks");
  auto devBase = Typed<uint64_t>(s.Get("deviceTargets"), napi_biguint64_array, "deviceTargets");
  auto devLength = Typed<double>(s.Get("deviceLengths"), napi_float64_array, "deviceLengths");
  auto devOrdinal = Typed<int32_t>(s.Get("deviceOrdinals"), napi_int32_array, "deviceOrdinals");
  Napi::Value out = s.Get("pieceBytes");
  auto outBytes = Typed<double>(out, napi_float64_array, "pieceBytes");
  Napi::Value hostTargets = s.Get("hostTargets");
  if (!hostTargets.IsArray()) ThrowBadArgument(env, "hostTargets must be an array");
  if (reads.second % 7 || pieces.second % 4 || tasks.second % 3) ThrowBadArgument(env, "batch records of the wrong length");
  if (devLength.second != devBase.second || devOrdinal.second != devBase.second) ThrowBadArgument(env, "device target arrays differ in length");
  size_t nPieces = pieces.second / 4;
  if (outBytes.second != nPieces) ThrowBadArgument(env, "pieceBytes must hold one number per piece");

  Napi::Array hosts = hostTargets.As<Napi::Array>();
  for (uint32_t i = 0; i < hosts.Length(); ++i) {
    HostView v = ReadHostView(hosts.Get(i), "hostTargets[i]");
    op->hostBase.push_back(v.data);
    op->hostLength.push_back(v.length);
  }
  for (size_t i = 0; i < devBase.second; ++i) {
    op->deviceBase.push_back(devBase.first[i]);
    op->deviceLength.push_back(Whole(env, devLength.first[i], 0, "device length"));
    op->deviceOrdinal.push_back(devOrdinal.first[i]);
  }
  size_t nHost = op->hostBase.size(), nTargets = nHost + op->deviceBase.size();
  op->pieces.resize(nPieces);
  for (size_t k = 0; k < nPieces; ++k) {
    const double* f = pieces.first + 4 * k;
    Piece& p = op->pieces[k];
    p.at = Whole(env, f[0], 0, "piece offset");
    p.size = Whole(env, f[1], 1, "piece size");
    p.target = static_cast<uint32_t>(Whole(env, f[2], 0, "piece target"));
    p.targetOffset = Whole(env, f[3], 0, "piece target offset");
    if (p.target >= nTargets) ThrowBadArgument(env, "batch piece target out of range");
    uint64_t limit = p.target < nHost ? op->hostLength[p.target] : op->deviceLength[p.target - nHost];
    if (p.targetOffset > limit || p.size > limit - p.targetOffset) ThrowBadArgument(env, "batch piece outside its target");
  }
  size_t nReads = reads.second / 7;
  op->reads.resize(nReads);
  for (size_t r = 0; r < nReads; ++r) {
    const double* f = reads.first + 7 * r;
    Read& rd = op->reads[r];
    uint64_t fdIndex = Whole(env, f[0], 0, "file index");
    if (fdIndex >= fds.second) ThrowBadArgument(env, "batch file index out of range");
    rd.fd = fds.first[fdIndex];
    rd.fileOffset = Whole(env, f[1], 0, "file offset");
    rd.length = Whole(env, f[2], 1, "read length");
    rd.firstPiece = static_cast<uint32_t>(Whole(env, f[3], 0, "first piece"));
    rd.pieces = static_cast<uint32_t>(Whole(env, f[4], 1, "piece count"));
    rd.directTarget = static_cast<int64_t>(Whole(env, f[5] + 1, 0, "direct target")) - 1;
    rd.directOffset = Whole(env, f[6], 0, "direct offset");
    if (static_cast<uint64_t>(rd.firstPiece) + rd.pieces > nPieces) ThrowBadArgument(env, "batch read pieces out of range");
    for (uint32_t k = rd.firstPiece; k < rd.firstPiece + rd.pieces; ++k) {
      const Piece& p = op->pieces[k];
      if (p.at > rd.length || p.size > rd.length - p.at) ThrowBadArgument(env, "batch piece outside its read");
    }
    if (rd.directTarget >= 0) {
      if (static_cast<size_t>(rd.directTarget) >= nHost) ThrowBadArgument(env, "batch direct target out of range");
      uint64_t limit = op->hostLength[rd.directTarget];
      if (rd.directOffset > limit || rd.length > limit - rd.directOffset) ThrowBadArgument(env, "batch direct read outside its target");
    }
  }
  size_t nTasks = tasks.second / 3;
  op->tasks.resize(nTasks);
  uint64_t expectRead = 0;
  for (size_t i = 0; i < nTasks; ++i) {
    const double* f = tasks.first + 3 * i;
    Task& t = op->tasks[i];
    t.firstRead = static_cast<uint32_t>(Whole(env, f[0], 0, "task first read"));
    t.reads = static_cast<uint32_t>(Whole(env, f[1], 1, "task reads"));
    t.device = static_cast<int>(static_cast<int64_t>(Whole(env, f[2] + 1, 0, "task device")) - 1);
    if (t.firstRead != expectRead || t.firstRead + static_cast<uint64_t>(t.reads) > nReads)
      ThrowBadArgument(env, "batch tasks must cover the reads in order");
    expectRead += t.reads;
    uint64_t half = 0;
    if (t.device >= 0) {
      DeviceState* d = PreparedDevice(t.device);
      if (!d) ThrowRecord(env, ErrorRecord::Misuse("ERR_PENSTOCK_INTERNAL", "device not prepared"));
      half = d->half;
    }
    for (uint32_t r = t.firstRead; r < t.firstRead + t.reads; ++r) {
      const Read& rd = op->reads[r];
      if (t.device >= 0 && (rd.length > half || rd.directTarget >= 0)) ThrowBadArgument(env, "batch device read larger than a bounce half");
      for (uint32_t k = rd.firstPiece; k < rd.firstPiece + rd.pieces; ++k) {
        uint32_t target = op->pieces[k].target;
        bool onDevice = target >= nHost;
        if (onDevice != (t.device >= 0) || (onDevice && op->deviceOrdinal[target - nHost] != t.device))
          ThrowBadArgument(env, "batch piece target does not match its task's memory");
      }
    }
  }
  if (expectRead != nReads) ThrowBadArgument(env, "batch tasks must cover the reads in order");

  op->pieceBytes = const_cast<double*>(outBytes.first);
  Napi::Value progress = s.Get("progress");
  if (!progress.IsUndefined() && !progress.IsFunction()) ThrowBadArgument(env, "progress must be a function");
  op->wantProgress = progress.IsFunction();
  if (op->wantProgress) op->progress = Napi::Persistent(progress.As<Napi::Function>());
  op->keep = Napi::Persistent(s);
  op->deferred = new Napi::Promise::Deferred(env);
  op->tsfn = BatchTsfn::New(env, "penstock-batch", 0, 1, nullptr);
  op->hook = new std::shared_ptr<BatchOp>(op);
  napi_add_env_cleanup_hook(env, TeardownHook, op->hook);

  Napi::Object handle = Napi::Object::New(env);
  handle.Set("promise", op->deferred->Promise());
  std::weak_ptr<BatchOp> weak = op;
  handle.Set("cancel", Napi::Function::New(env, [weak](const Napi::CallbackInfo&) {
               if (auto o = weak.lock()) o->Cancel();
             }));
  op->Start();
  return handle;
}

}  // namespace

void RegisterBatch(Napi::Env env, Napi::Object exports) {
  exports.Set("submitBatch", Napi::Function::New(env, SubmitBatch));
}

}  // namespace penstock
