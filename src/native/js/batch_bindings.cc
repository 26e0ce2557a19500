// The addon's entry for batched reads: the plan built by batch-read.ts, checked index by index
// and length by length (no plan can make a task touch memory outside its targets), the batch's
// completion channel, and the cleanup hook that waits for its tasks when the environment goes.
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "js/batch_bindings.h"
#include "engine/batch_op.h"
#include "engine/copy_batch.h"
#include "engine/device.h"
#include "js/host_view.h"
#include "js/js_settlement.h"
#include "js/op_result.h"

namespace penstock {

namespace {

class BatchJs;

struct BatchEvent {
  std::shared_ptr<BatchJs> batch;
  bool done;  // false: progress
};

// Main thread: settles the batch, or delivers progress.
void DeliverBatchEvent(Napi::Env env, Napi::Function, std::nullptr_t*, BatchEvent* event);
using BatchTsfn = Napi::TypedThreadSafeFunction<std::nullptr_t, BatchEvent, DeliverBatchEvent>;

// A batch's JS side: its settlement, its own completion channel, and the environment cleanup
// hook's hold on it (which keeps it alive until it settles).
class BatchJs final : public BatchListener, public std::enable_shared_from_this<BatchJs> {
 public:
  BatchJs(Napi::Env env, std::shared_ptr<BatchOp> batch, Napi::Value keep, Napi::Value progress)
      : op(std::move(batch)), js(env, keep, progress), tsfn(BatchTsfn::New(env, "penstock-batch", 0, 1, nullptr)) {}

  void Posted(bool done) override {
    auto* ev = new BatchEvent{shared_from_this(), done};
    if (tsfn.NonBlockingCall(ev) != napi_ok) delete ev;
  }

  std::shared_ptr<BatchOp> op;
  JsSettlement js;
  BatchTsfn tsfn;
  std::shared_ptr<BatchJs>* hook = nullptr;
  bool torn = false;  // its environment went away
};

// One cleanup hook per live batch: environment teardown waits for its running tasks. The batch
// can no longer settle, and its JS references must not be deleted through the dying
// environment, so its JS side is left behind on purpose in a list that is never destroyed (as
// instance.cc does for operations): kept, not lost. The hook's own holder goes.
void TeardownHook(void* arg) {
  auto* holder = static_cast<std::shared_ptr<BatchJs>*>(arg);
  BatchJs& b = **holder;
  b.op->CancelAndWait();
  b.js.Abandon();
  b.torn = true;
  b.hook = nullptr;
  b.tsfn.Abort();
  static std::mutex& mutex = *new std::mutex();
  static auto& abandoned = *new std::vector<std::shared_ptr<BatchJs>>();
  {
    std::lock_guard<std::mutex> lock(mutex);
    abandoned.push_back(std::move(*holder));
  }
  delete holder;
}

Napi::Object BatchResultJs(Napi::Env env, const BatchOp& op) {
  Napi::Object result = Napi::Object::New(env);
  result.Set("preads", static_cast<double>(op.Preads()));
  result.Set("copies", static_cast<double>(op.Copies()));
  result.Set("copyBatches", static_cast<double>(op.CopyBatches()));
  result.Set("unbatchedFills", static_cast<double>(op.UnbatchedFills()));
  result.Set("busyNs", static_cast<double>(op.BusyNs()));
  result.Set("ioNs", static_cast<double>(op.IoNs()));
  result.Set("waitNs", static_cast<double>(op.WaitNs()));
  result.Set("timeline", TimelineJs(env, op.Timeline()));
  result.Set("ringReads", static_cast<double>(op.RingReads()));
  if (op.RingError()) result.Set("ringError", ToJs(env, ErrorRecord::Os(op.RingError(), "io_uring")));
  else result.Set("ringError", env.Null());
  const auto& failed = op.ReadErrors();
  Napi::Array errors = Napi::Array::New(env, failed.size());
  for (size_t i = 0; i < failed.size(); ++i) {
    Napi::Object e = Napi::Object::New(env);
    e.Set("read", failed[i].first);
    e.Set("error", ToJs(env, failed[i].second));
    errors.Set(static_cast<uint32_t>(i), e);
  }
  result.Set("readErrors", errors);
  return result;
}

void DeliverBatchEvent(Napi::Env env, Napi::Function, std::nullptr_t*, BatchEvent* event) {
  std::unique_ptr<BatchEvent> ev(event);
  BatchJs& b = *ev->batch;
  if (env == nullptr || b.torn) return;
  try {
    Napi::HandleScope scope(env);
    const BatchOp& op = *b.op;
    if (!ev->done) {
      b.js.Progress(env, b.op->TakeProgress());
      return;
    }
    b.js.Settle(env, b.op->TakeProgress(), op.Cancelled(), op.Failed(), op.Error(), [&] { return BatchResultJs(env, op); });
  } catch (const Napi::Error&) {
    // An environment that is going away refuses to run JS; nothing can be reported to it.
  }
  if (ev->done) {
    // Settled: the teardown hook and the completion channel are no longer needed.
    std::shared_ptr<BatchJs>* holder = b.hook;
    b.hook = nullptr;
    b.tsfn.Release();
    if (holder) {
      napi_remove_env_cleanup_hook(env, TeardownHook, holder);
      delete holder;
    }
  }
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

  auto fds = ArgTyped<int32_t>(s.Get("fds"), napi_int32_array, "fds");
  auto reads = ArgTyped<double>(s.Get("reads"), napi_float64_array, "reads");
  auto pieces = ArgTyped<double>(s.Get("pieces"), napi_float64_array, "pieces");
  auto tasks = ArgTyped<double>(s.Get("tasks"), napi_float64_array, "tasks");
  auto devBase = ArgTyped<uint64_t>(s.Get("deviceTargets"), napi_biguint64_array, "deviceTargets");
  auto devLength = ArgTyped<double>(s.Get("deviceLengths"), napi_float64_array, "deviceLengths");
  auto devOrdinal = ArgTyped<int32_t>(s.Get("deviceOrdinals"), napi_int32_array, "deviceOrdinals");
  Napi::Value out = s.Get("pieceBytes");
  auto outBytes = ArgTyped<double>(out, napi_float64_array, "pieceBytes");
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
  // io_uring, where the plan asks for it: entries per worker's ring and scratch bytes per group.
  Napi::Value ring = s.Get("ring");
  if (!ring.IsUndefined()) {
    op->ringEntries = static_cast<unsigned>(ArgInt(ring, "ring", 0, 65536));
    op->ringScratch = ArgU64(s.Get("ringScratch"), "ringScratch");
    if (op->ringEntries && !op->ringScratch) ThrowBadArgument(env, "ringScratch must be positive with a ring");
  }
  // Where a fill's copies go in batch calls, and how many to a call, as the plan asks: only with a
  // driver that has them.
  Napi::Value copyBatchMin = s.Get("copyBatchMin");
  if (!copyBatchMin.IsUndefined()) {
    op->copyBatchMin = static_cast<uint32_t>(ArgInt(copyBatchMin, "copyBatchMin", 0, 1 << 30));
    op->copyBatchMax = static_cast<uint32_t>(ArgInt(s.Get("copyBatchMax"), "copyBatchMax", 1, 1 << 30));
    Napi::Value copyBatch = s.Get("copyBatch");
    if (!copyBatch.IsBoolean()) ThrowBadArgument(env, "copyBatch must be a boolean with copyBatchMin");
    op->copyBatch = copyBatch.As<Napi::Boolean>().Value();
    if (op->copyBatch && !HaveCopyBatch())
      ThrowRecord(env, ErrorRecord::Misuse("ERR_PENSTOCK_INTERNAL",
                                           "copy batches asked of a driver without cuMemcpyBatchAsync"));
  }
  // The spec stays referenced until the batch settles: its arrays and the target memory with it.
  auto batch = std::make_shared<BatchJs>(env, op, s, progress);
  op->listener = batch.get();
  batch->hook = new std::shared_ptr<BatchJs>(batch);
  napi_add_env_cleanup_hook(env, TeardownHook, batch->hook);

  Napi::Object handle = Napi::Object::New(env);
  handle.Set("promise", batch->js.Promise());
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
