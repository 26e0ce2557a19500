/**
 * Batched reads: many ranges of one or several files, into host or GPU memory, in one call with
 * one Promise, one progress stream and a result per range. Ranges near each other in a file
 * share one pread (batch-plan.ts); ranges into a GPU are gathered into pinned staging and
 * copied over in as few copies as their targets allow. The building block for data loaders that
 * fetch thousands of samples at once: per range it costs a pread, not an operation.
 */
import { native, type NativeBatchResult } from '../../addon/binding.js';
import { BATCH_PART_PIECES, BATCH_RING_ENTRIES, BATCH_RING_SCRATCH, COPY_BATCH_MAX, COPY_BATCH_MIN, planColumns, planParts, type BatchPlan, type PlanColumns } from '../../plan/batch-plan.js';
import { DeviceBuffer } from '../../memory/device-buffer.js';
import { AbortError, fromNative, usage } from '../../vocabulary/errors.js';
import { PenstockFile, type Memory } from '../file.js';
import { hostRegion, isHostMemory, regionBytes } from '../../memory/host-memory.js';
import type { PinnedBuffer } from '../../memory/pinned-buffer.js';
import { bounceBytes, cudaStatus, currentSettings, ensurePool } from '../../addon/runtime.js';
import { prepareDevice } from '../../addon/gpu-preparation.js';
import { batchResult, recordBatchFailure, type BatchReadResult } from './batch-result.js';
import { progressOf } from '../transfer-options.js';
import { JobRun } from '../runner.js';
import { checkLength, checkRange, describe, isLength } from '../../vocabulary/validate.js';
import { checkOptionKeys } from '../../settings/option-keys.js';

/** The error codes this module adds, each with its meaning. */
export const BATCH_ERROR_CODES = {
  ERR_PENSTOCK_NO_FILE: 'a batch range names no file, and the batch has no default file',
} as const;

/** One range of a batch. */
export interface BatchRange {
  /** The file to read from; default: the batch's `file` option. */
  file?: PenstockFile;
  /** Byte offset in the file. */
  fileOffset: number;
  /** Bytes to read. */
  size: number;
  /** Where they go: GPU or host memory. */
  target: Memory;
  /** Byte offset in the target (default 0). */
  targetOffset?: number;
}

/** Options of {@link readBatch}. */
export interface BatchReadOptions {
  /** The file of ranges that name none. */
  file?: PenstockFile;
  /** Cancels the reads not yet done; the Promise then rejects with an AbortError. */
  signal?: AbortSignal;
  /** Called on the JS thread with the bytes done so far over the whole batch. */
  onProgress?: (bytesDone: number) => void;
}

/** The most ranges one batch may hold (its plan keeps about 48 bytes of columns per range). */
export const MAX_BATCH_RANGES = 1 << 24;

const READABLE = new Set(['r', 'r+', 'w+', 'wx+']);

/**
 * Reads every range of `ranges` in one operation. Bad input (an offset that is not a
 * non-negative integer, a range past its target's end, a closed or write-only file, freed
 * memory) rejects the whole call before anything is read. Failures of the reads themselves
 * (an I/O error of one file) are reported per range in `errors`; a failed GPU copy or an abort
 * rejects the whole call.
 */
export async function readBatch(ranges: readonly BatchRange[], options: BatchReadOptions = {}): Promise<BatchReadResult> {
  return await start(ranges, options, BATCH_PART_PIECES);
}

/**
 * @internal {@link readBatch} with a first part of `partPieces` pieces (Infinity: the whole batch
 * as one part), for benchmarks and tests that weigh the part size.
 */
export async function readBatchInParts(ranges: readonly BatchRange[], options: BatchReadOptions, partPieces: number): Promise<BatchReadResult> {
  return await start(ranges, options, partPieces);
}

function start(ranges: readonly BatchRange[], options: BatchReadOptions, partPieces: number): Promise<BatchReadResult> {
  if (!Array.isArray(ranges)) throw usage('ERR_PENSTOCK_INVALID_ARGUMENT', `ranges must be an array, got ${describe(ranges)}`);
  checkOptionKeys('readBatch', options);
  // The columns are allocated for the whole length before the ranges are looked at: a length no
  // batch can have (a sparse array of 2^32-1) is refused here rather than failing to allocate.
  if (ranges.length > MAX_BATCH_RANGES)
    throw usage('ERR_PENSTOCK_INVALID_ARGUMENT', `a batch holds at most ${MAX_BATCH_RANGES} ranges, got ${ranges.length}; split it into several batches`);
  const { signal, onProgress } = options;
  if (signal !== undefined && !(signal instanceof AbortSignal)) throw usage('ERR_PENSTOCK_INVALID_ARGUMENT', 'signal must be an AbortSignal');
  if (onProgress !== undefined && typeof onProgress !== 'function') throw usage('ERR_PENSTOCK_INVALID_ARGUMENT', 'onProgress must be a function');
  if (options.file !== undefined && !(options.file instanceof PenstockFile)) throw usage('ERR_PENSTOCK_INVALID_ARGUMENT', 'file must be a PenstockFile');
  if (signal?.aborted) throw new AbortError(undefined, { cause: signal.reason });
  // What follows holds the columns, not the ranges: the caller's range objects (thousands) can
  // be collected while the reads run, instead of being copied by every young-generation GC.
  return submit(collect(ranges, options.file), signal, onProgress, partPieces);
}

/** A batch's ranges, checked and resolved to columns, with the files and memory they name. */
interface Collected {
  planned: PlanColumns;
  /** Files by index (the columns' `file`). */
  files: PenstockFile[];
  /** Host targets by index: the buffers under the ranges' targets. */
  hostViews: (ArrayBuffer | Uint8Array)[];
  pinned: PinnedBuffer[];
  /** GPU targets by index (after the host ones). */
  devices: DeviceBuffer[];
  hostRangeCount: number;
}

/**
 * Checks every range and resolves it into the columns. Kept apart from the submission so that
 * the optimizing compiler takes this loop on its own: one function per concern compiles sooner
 * and is thrown back to the interpreter less often in a process that mixes host and GPU batches.
 */
function collect(ranges: readonly BatchRange[], defaultFile: PenstockFile | undefined): Collected {
  const files = new Map<PenstockFile, number>();
  const hostIndex = new Map<ArrayBuffer | SharedArrayBuffer, number>();
  const hostTargets = new Map<object, { index: number; length: number; byteOffset: number }>();
  const hostViews: (ArrayBuffer | Uint8Array)[] = [];
  const pinned = new Set<PinnedBuffer>();
  const devices: DeviceBuffer[] = [];
  const deviceTargets = new Map<DeviceBuffer, { index: number; length: number; device: number }>();
  const count = ranges.length;
  const planned = planColumns(count);
  let hostRangeCount = 0;
  // Ranges mostly repeat the file and target of the one before: those skip the lookups.
  let lastFile: PenstockFile | undefined;
  let lastFi = -1;
  let lastDevice: DeviceBuffer | undefined;
  let lastD: { index: number; length: number; device: number } | undefined;
  let lastHost: unknown;
  let lastH: { index: number; length: number; byteOffset: number } | undefined;
  for (let i = 0; i < count; i++) {
    const r = ranges[i];
    if (!r || typeof r !== 'object') throw usage('ERR_PENSTOCK_INVALID_ARGUMENT', `ranges[${i}] must be an object, got ${describe(r)}`);
    const file = r.file ?? defaultFile;
    let fi = lastFi;
    if (file !== lastFile || fi < 0) {
      if (file === undefined) throw usage('ERR_PENSTOCK_NO_FILE', `ranges[${i}] names no file and the batch has no default file`);
      if (!(file instanceof PenstockFile)) throw usage('ERR_PENSTOCK_INVALID_ARGUMENT', `ranges[${i}].file must be a PenstockFile`);
      let known = files.get(file);
      if (known === undefined) {
        if (file.closed) throw usage('ERR_PENSTOCK_FILE_CLOSED', `The file ${file.path} is closed`);
        if (!READABLE.has(file.flags)) throw usage('ERR_PENSTOCK_NOT_READABLE', `The file ${file.path} was opened '${file.flags}' (write-only)`);
        files.set(file, (known = files.size));
      }
      lastFile = file;
      lastFi = fi = known;
    }
    const { fileOffset, size } = r;
    const targetOffset = r.targetOffset ?? 0;
    // Names for the messages are built only on failure: a batch may hold 10 000 ranges.
    if (!isLength(fileOffset)) checkLength(fileOffset, `ranges[${i}].fileOffset`);
    if (!isLength(size)) checkLength(size, `ranges[${i}].size`);
    if (!isLength(targetOffset)) checkLength(targetOffset, `ranges[${i}].targetOffset`);
    // A misspelt key (`targetOfset`) would otherwise read into the wrong place silently. Ranges
    // are built alike by the code that makes them, so the first one's keys are checked: a key
    // walk of every range would add to the per-range cost this loop is kept lean for.
    if (i === 0) checkOptionKeys('readBatch range', r, `ranges[${i}]`);
    planned.file[i] = fi;
    planned.fileOffset[i] = fileOffset;
    planned.size[i] = size;
    const t = r.target;
    if (t !== lastHost && (t === lastDevice || t instanceof DeviceBuffer)) {
      let d = t === lastDevice ? lastD : deviceTargets.get(t);
      if (d === undefined) {
        t.assertLive();
        deviceTargets.set(t, (d = { index: devices.push(t) - 1, length: t.byteLength, device: t.device }));
      }
      lastDevice = t;
      lastD = d;
      if (targetOffset > d.length || size > d.length - targetOffset) checkRange(targetOffset, size, d.length, `DeviceBuffer of ranges[${i}]`);
      planned.target[i] = d.index;
      planned.targetOffset[i] = targetOffset;
      planned.device[i] = d.device;
    } else {
      // Many ranges share one target: its region is resolved (and checked) once per batch.
      let target = t === lastHost ? lastH : hostTargets.get(t);
      if (target === undefined) {
        if (!isHostMemory(t)) throw usage('ERR_PENSTOCK_INVALID_BUFFER', `ranges[${i}].target must be a DeviceBuffer or host memory, got ${describe(t)}`);
        const h = hostRegion(t, `target of ranges[${i}]`);
        // A view penstock built from the engine's record: its buffer and offset can be trusted.
        const bytes = regionBytes(h);
        const buffer = bytes.buffer;
        let hi = hostIndex.get(buffer);
        if (hi === undefined) {
          hostIndex.set(buffer, (hi = hostViews.length));
          // Node-API reads a SharedArrayBuffer only through a view.
          hostViews.push(buffer instanceof ArrayBuffer ? buffer : new Uint8Array(buffer));
        }
        if (h.pinned) pinned.add(h.pinned);
        hostTargets.set(t, (target = { index: hi, length: h.length, byteOffset: bytes.byteOffset }));
      }
      lastHost = t;
      lastH = target;
      if (targetOffset > target.length || size > target.length - targetOffset) checkRange(targetOffset, size, target.length, `target of ranges[${i}]`);
      planned.target[i] = target.index;
      planned.targetOffset[i] = target.byteOffset + targetOffset;
      planned.device[i] = -1;
      hostRangeCount++;
    }
  }
  // Device targets are numbered after the host ones.
  const nHost = hostViews.length;
  if (hostRangeCount < count) for (let i = 0; i < count; i++) if (planned.device[i]! >= 0) planned.target[i]! += nHost;
  return { planned, files: [...files.keys()], hostViews, pinned: [...pinned], devices, hostRangeCount };
}

/** The largest read into a GPU's staging: a bounce half. One function for every batch, so the planner's call site stays monomorphic. */
function deviceReadMax(): number {
  return bounceBytes() / 2;
}

/** Plans the batch in parts, submitting each as soon as it is planned, and settles it once every part has. */
function submit(c: Collected, signal: AbortSignal | undefined, onProgress: ((n: number) => void) | undefined, partPieces: number): Promise<BatchReadResult> {
  const { planned, files, hostViews, devices, hostRangeCount } = c;
  const s = currentSettings();
  ensurePool();
  const ordinals = new Set<number>();
  for (const d of devices) ordinals.add(d.device);
  for (const ordinal of ordinals) prepareDevice(ordinal);
  const limits = { threads: s.threads, hostReadMax: s.taskSize, deviceReadMax, hostTargets: hostViews.length };
  const fds = Int32Array.from(files, (f) => f.fd);
  const deviceTargets = BigUint64Array.from(devices, (d) => d.ptr);
  const deviceLengths = Float64Array.from(devices, (d) => d.byteLength);
  const deviceOrdinals = Int32Array.from(devices, (d) => d.device);
  const progress = onProgress ? progressOf(onProgress) : undefined;
  const copyBatch = devices.length > 0 && cudaStatus().copyBatch !== undefined;

  const releases: (() => void)[] = [];
  for (const d of devices) releases.push(d.retain());
  for (const p of c.pinned) releases.push(p.retain());
  const release = () => {
    for (const r of releases) r();
  };
  // Each part is submitted as soon as it is planned, and the next planned while the pool reads it.
  // Progress is the sum of what each part has done. The parts run as one (runner.ts): the first
  // failure is the batch's, the parts still queued are cancelled, and every part is waited for,
  // so nothing of the batch writes into its targets once the Promise has settled.
  const run = new JobRun<NativeBatchResult>(signal);
  const parts: Part[] = [];
  const partDone: number[] = [];
  for (const plan of planParts(planned, limits, partPieces)) {
    const j = parts.length;
    const report = progress && ((n: number) => {
      partDone[j] = n;
      let sum = 0;
      for (const d of partDone) sum += d;
      progress(sum);
    });
    const pieceBytes = new Float64Array(plan.pieceRange.length);
    const spec = {
      fds, hostTargets: hostViews, deviceTargets, deviceLengths, deviceOrdinals, ring: BATCH_RING_ENTRIES, ringScratch: BATCH_RING_SCRATCH,
      reads: plan.reads, pieces: plan.pieces, tasks: plan.tasks, pieceBytes, progress: report,
      copyBatchMin: COPY_BATCH_MIN, copyBatchMax: COPY_BATCH_MAX, copyBatch,
    };
    if (!run.submit(() => native().submitBatch(spec))) break;
    parts.push({ plan, pieceBytes });
    partDone.push(0);
  }
  if (parts.length === 0) {
    release();
    // The first part was refused: nothing runs, and its refusal is the batch's error.
    return run.settled().then((out) => {
      throw (out as { error: Error }).error;
    });
  }
  const finished = run.settled().then((out) => {
    if (!out.ok) {
      recordBatchFailure(devices.length > 0, hostRangeCount > 0);
      throw out.error;
    }
    const settled = parts.map((q, j) => ({ plan: q.plan, pieceBytes: q.pieceBytes, result: out.results[j]! }));
    return batchResult(settled, planned, files, hostRangeCount);
  }).finally(release);
  for (const f of files) f.trackOperation(finished);
  return finished;
}

/** One submitted part of a batch: its plan and the bytes its pieces got. */
interface Part {
  plan: BatchPlan;
  pieceBytes: Float64Array;
}
