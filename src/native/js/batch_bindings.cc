// The addon's entry for batched reads: the plan built by batch-read.ts, checked index by index
// and length by length (no plan can make a task touch memory outside its targets), then started
// as a job like any other (jobs.h).
#include <memory>
#include <string>
#include <vector>

#include "js/batch_bindings.h"
#include "engine/batch_read.h"
#include "engine/copy_batch.h"
#include "engine/device.h"
#include "js/args.h"
#include "js/host_view.h"
#include "js/jobs.h"

namespace penstock {

namespace {

// A field of a Float64Array record: an integer in [lo, 2^53).
uint64_t Whole(Napi::Env env, double d, double lo, const char* name) {
  if (!(d >= lo) || d > 9007199254740991.0 || static_cast<double>(static_cast<int64_t>(d)) != d)
    ThrowBadArgument(env, std::string("batch ") + name + " out of range");
  return static_cast<uint64_t>(static_cast<int64_t>(d));
}

// submitBatch(spec) → { promise, id, cancel }. The spec is plain data built by batch-read.ts; every
// index and length in it is checked here again, so no plan can make a task touch memory
// outside its targets.
Napi::Value SubmitBatch(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() != 1 || !info[0].IsObject()) ThrowBadArgument(env, "submitBatch(spec)");
  Napi::Object s = info[0].As<Napi::Object>();
  // The plan's own keys and nothing else, as every spec reader does; absent ones read as
  // undefined and are refused below where the plan needs them.
  SpecReader keys(s, {"fds", "reads", "pieces", "tasks", "deviceTargets", "deviceLengths", "deviceOrdinals", "pieceBytes",
                      "hostTargets", "progress", "ring", "ringScratch", "copyBatchMin", "copyBatchMax", "copyBatch"});
  auto get = [&](const char* key) { return keys.Has(key) ? keys.Require(key) : env.Undefined(); };
  BatchPlan plan;

  auto fds = ArgTyped<int32_t>(get("fds"), napi_int32_array, "fds");
  auto reads = ArgTyped<double>(get("reads"), napi_float64_array, "reads");
  auto pieces = ArgTyped<double>(get("pieces"), napi_float64_array, "pieces");
  auto tasks = ArgTyped<double>(get("tasks"), napi_float64_array, "tasks");
  auto devBase = ArgTyped<uint64_t>(get("deviceTargets"), napi_biguint64_array, "deviceTargets");
  auto devLength = ArgTyped<double>(get("deviceLengths"), napi_float64_array, "deviceLengths");
  auto devOrdinal = ArgTyped<int32_t>(get("deviceOrdinals"), napi_int32_array, "deviceOrdinals");
  Napi::Value out = get("pieceBytes");
  auto outBytes = ArgTyped<double>(out, napi_float64_array, "pieceBytes");
  Napi::Value hostTargets = get("hostTargets");
  if (!hostTargets.IsArray()) ThrowBadArgument(env, "hostTargets must be an array");
  if (reads.second % 7 || pieces.second % 4 || tasks.second % 3) ThrowBadArgument(env, "batch records of the wrong length");
  if (devLength.second != devBase.second || devOrdinal.second != devBase.second) ThrowBadArgument(env, "device target arrays differ in length");
  size_t nPieces = pieces.second / 4;
  if (outBytes.second != nPieces) ThrowBadArgument(env, "pieceBytes must hold one number per piece");

  Napi::Array hosts = hostTargets.As<Napi::Array>();
  for (uint32_t i = 0; i < hosts.Length(); ++i) {
    HostView v = ReadHostView(hosts.Get(i), "hostTargets[i]");
    plan.hostBase.push_back(v.data);
    plan.hostLength.push_back(v.length);
  }
  for (size_t i = 0; i < devBase.second; ++i) {
    plan.deviceBase.push_back(devBase.first[i]);
    plan.deviceLength.push_back(Whole(env, devLength.first[i], 0, "device length"));
    plan.deviceOrdinal.push_back(devOrdinal.first[i]);
  }
  size_t nHost = plan.hostBase.size(), nTargets = nHost + plan.deviceBase.size();
  plan.pieces.resize(nPieces);
  for (size_t k = 0; k < nPieces; ++k) {
    const double* f = pieces.first + 4 * k;
    Piece& p = plan.pieces[k];
    p.at = Whole(env, f[0], 0, "piece offset");
    p.size = Whole(env, f[1], 1, "piece size");
    p.target = static_cast<uint32_t>(Whole(env, f[2], 0, "piece target"));
    p.targetOffset = Whole(env, f[3], 0, "piece target offset");
    if (p.target >= nTargets) ThrowBadArgument(env, "batch piece target out of range");
    uint64_t limit = p.target < nHost ? plan.hostLength[p.target] : plan.deviceLength[p.target - nHost];
    if (p.targetOffset > limit || p.size > limit - p.targetOffset) ThrowBadArgument(env, "batch piece outside its target");
  }
  size_t nReads = reads.second / 7;
  plan.reads.resize(nReads);
  for (size_t r = 0; r < nReads; ++r) {
    const double* f = reads.first + 7 * r;
    Read& rd = plan.reads[r];
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
      const Piece& p = plan.pieces[k];
      if (p.at > rd.length || p.size > rd.length - p.at) ThrowBadArgument(env, "batch piece outside its read");
    }
    if (rd.directTarget >= 0) {
      if (static_cast<size_t>(rd.directTarget) >= nHost) ThrowBadArgument(env, "batch direct target out of range");
      uint64_t limit = plan.hostLength[rd.directTarget];
      if (rd.directOffset > limit || rd.length > limit - rd.directOffset) ThrowBadArgument(env, "batch direct read outside its target");
    }
  }
  size_t nTasks = tasks.second / 3;
  plan.tasks.resize(nTasks);
  uint64_t expectRead = 0;
  for (size_t i = 0; i < nTasks; ++i) {
    const double* f = tasks.first + 3 * i;
    Task& t = plan.tasks[i];
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
      const Read& rd = plan.reads[r];
      if (t.device >= 0 && (rd.length > half || rd.directTarget >= 0)) ThrowBadArgument(env, "batch device read larger than a bounce half");
      for (uint32_t k = rd.firstPiece; k < rd.firstPiece + rd.pieces; ++k) {
        uint32_t target = plan.pieces[k].target;
        bool onDevice = target >= nHost;
        if (onDevice != (t.device >= 0) || (onDevice && plan.deviceOrdinal[target - nHost] != t.device))
          ThrowBadArgument(env, "batch piece target does not match its task's memory");
      }
    }
  }
  if (expectRead != nReads) ThrowBadArgument(env, "batch tasks must cover the reads in order");

  plan.pieceBytes = const_cast<double*>(outBytes.first);
  Napi::Value progress = get("progress");
  if (!progress.IsUndefined() && !progress.IsFunction()) ThrowBadArgument(env, "progress must be a function");
  // io_uring, where the plan asks for it: entries per worker's ring and scratch bytes per group.
  Napi::Value ring = get("ring");
  if (!ring.IsUndefined()) {
    plan.ringEntries = static_cast<unsigned>(ArgInt(ring, "ring", 0, 65536));
    plan.ringScratch = ArgU64(get("ringScratch"), "ringScratch");
    if (plan.ringEntries && !plan.ringScratch) ThrowBadArgument(env, "ringScratch must be positive with a ring");
  }
  // Where a fill's copies go in batch calls, and how many to a call, as the plan asks: only with a
  // driver that has them.
  Napi::Value copyBatchMin = get("copyBatchMin");
  if (!copyBatchMin.IsUndefined()) {
    plan.copyBatchMin = static_cast<uint32_t>(ArgInt(copyBatchMin, "copyBatchMin", 0, 1 << 30));
    plan.copyBatchMax = static_cast<uint32_t>(ArgInt(get("copyBatchMax"), "copyBatchMax", 1, 1 << 30));
    Napi::Value copyBatch = get("copyBatch");
    if (!copyBatch.IsBoolean()) ThrowBadArgument(env, "copyBatch must be a boolean with copyBatchMin");
    plan.copyBatch = copyBatch.As<Napi::Boolean>().Value();
    if (plan.copyBatch && !HaveCopyBatch())
      ThrowRecord(env, ErrorRecord::Misuse("ERR_PENSTOCK_INTERNAL",
                                           "copy batches asked of a driver without cuMemcpyBatchAsync"));
  }
  // The spec stays referenced until the batch settles: its arrays and the target memory with it.
  return StartJob(env, std::make_unique<BatchRead>(std::move(plan)), s, progress);
}

}  // namespace

void RegisterBatch(Napi::Env env, Napi::Object exports) {
  exports.Set("submitBatch", Napi::Function::New(env, SubmitBatch));
}

}  // namespace penstock
