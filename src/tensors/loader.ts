/**
 * `loadTensors`: a checkpoint into one slab of GPU (or host) memory. Headers are parsed and
 * checked first; then one allocation; then every span is read by the engine, all files at
 * once, each span one pipelined operation (an unfiltered file is one span).
 */
import { DeviceBuffer } from '../memory/device-buffer.js';
import { warmUpGpu } from '../addon/gpu-preparation.js';
import { AbortError, usage } from '../vocabulary/errors.js';
import { describe, isLength } from '../vocabulary/validate.js';
import { checkOptionKeys } from '../settings/option-keys.js';
import type { Memory } from '../engine/file.js';
import { PinnedBuffer } from '../memory/pinned-buffer.js';
import { mappedShareOf, type OpRecord } from '../engine/op-record.js';
import type { Reason } from '../vocabulary/reasons.js';
import { describeCheckpoint, type Checkpoint, type CheckpointInput } from './checkpoint.js';
import { formatError } from '../formats/errors.js';
import { planLoad, type LoadPlan, type RowShard, type Span, type TensorFilter } from './load-plan.js';
import type { SourceOpener } from './source.js';
import { isRemoteRecord } from '../sources/source.js';
import { TensorSet, type FileLoadRecord, type SlabPlace } from './tensor-set.js';

/** Options of {@link loadTensors}. */
export interface LoadTensorsOptions {
  /** GPU ordinal of the slab (default 0). Ignored with `host`. */
  device?: number;
  /** Load into host memory instead: `true` (plain memory) or `'pinned'` (page-locked). */
  host?: boolean | 'pinned';
  /** Only these tensors: a list of names (each must exist), `{ prefix }`, or a predicate. */
  filter?: TensorFilter;
  /** Tensor-parallel shard: only this shard's rows of every 2-D tensor are read. */
  rows?: RowShard;
  /** Gaps of at most this many bytes between chosen tensors are read through (default 1 MiB). */
  coalesceGap?: number;
  /** Engine operations in flight at once over all files (default 16; every file gets one at once at least). */
  concurrency?: number;
  /** Opens paths (default: local files); sources given directly are used as they are and not closed. */
  openSource?: SourceOpener;
  /** Cancels the load: reads not yet done stop, the slab is freed, and the Promise rejects with an AbortError. */
  signal?: AbortSignal;
  /** Bytes in memory so far, over all files. */
  onProgress?: (bytesDone: number, bytesTotal: number) => void;
}

/**
 * Loads a checkpoint: a `.safetensors` file, a sharded `*.index.json`, a model directory (its
 * index, else its `model.safetensors`, else its `*.safetensors` files), `.npy` files, a list of
 * files, or open sources. Every header is checked before any data moves; on any failure the
 * slab is freed and nothing is returned.
 */
export async function loadTensors(input: CheckpointInput, options: LoadTensorsOptions = {}): Promise<TensorSet> {
  const t0 = performance.now();
  checkLoadOptions(options);
  const signal = options.signal;
  if (signal?.aborted) throw new AbortError(undefined, { cause: signal.reason });
  // The GPU's context is made on another thread while the headers are read and the load planned.
  const warm = options.host ? undefined : warmUpGpu(options.device ?? 0);
  const cp = await describeCheckpoint(input, { openSource: options.openSource, signal });
  // Sources given directly stay open; the files opened here for paths are closed at the end.
  const given = new Set((Array.isArray(input) ? input : [input]).filter((x) => typeof x !== 'string'));
  try {
    const place: SlabPlace = options.host ? { kind: 'host', pinned: options.host === 'pinned' } : { kind: 'device', device: options.device ?? 0 };
    // In host memory every tensor is placed where a typed array can view it (`values`).
    const plan = planLoad(cp, { filter: options.filter, rows: options.rows, coalesceGap: options.coalesceGap, alignElements: place.kind === 'host' });
    await warm;
    const { slab, pinned } = allocateSlab(place, plan.slabBytes);
    try {
      const files = await readSpans(cp, plan, slab, pinned, place, options);
      // Tensors the reads left misaligned are copied to their aligned places.
      const bytes = pinned ? pinned.bytes : (slab as Uint8Array);
      for (const t of plan.tensors) if (t.copyFrom !== undefined) bytes.copyWithin(t.byteOffset, t.copyFrom, t.copyFrom + t.byteLength);
      const metadata: Record<string, Record<string, string>> = {};
      for (const f of cp.files) if (f.metadata) metadata[f.path] = f.metadata;
      const init: ConstructorParameters<typeof TensorSet>[0] = {
        slab: pinned ? new Uint8Array(pinned.buffer, 0, plan.slabBytes) : slab, place, planned: plan.tensors,
        paths: cp.files.map((f) => f.path), metadata, files, bytes: plan.readBytes, seconds: (performance.now() - t0) / 1e3,
      };
      if (pinned) init.pinned = pinned;
      if (cp.index) init.indexMetadata = cp.index.metadata;
      return new TensorSet(init);
    } catch (err) {
      if (slab instanceof DeviceBuffer) slab.free();
      pinned?.free();
      throw err;
    }
  } finally {
    await Promise.allSettled(cp.files.filter((f) => !given.has(f.source)).map((f) => f.source.close()));
  }
}

/**
 * Every option is checked before a file is opened: a value of the wrong type would otherwise
 * surface late (a NaN concurrency started no reads at all, a numeric onProgress threw inside
 * the engine's callback).
 */
function checkLoadOptions(o: LoadTensorsOptions): void {
  checkOptionKeys('loadTensors', o);
  const bad = (name: string, wants: string, v: unknown) => usage('ERR_PENSTOCK_INVALID_ARGUMENT', `loadTensors() option ${name} must be ${wants}, got ${describe(v)}`);
  const { device, host, concurrency, coalesceGap, filter, rows, openSource, signal, onProgress } = o;
  if (device !== undefined && !isLength(device)) throw bad('device', 'a GPU ordinal (a non-negative integer)', device);
  if (host !== undefined && typeof host !== 'boolean' && host !== 'pinned') throw bad('host', "true, false or 'pinned'", host);
  if (concurrency !== undefined && !(isLength(concurrency) && concurrency >= 1)) throw bad('concurrency', 'a positive integer', concurrency);
  if (coalesceGap !== undefined && !isLength(coalesceGap)) throw bad('coalesceGap', 'a non-negative integer (bytes)', coalesceGap);
  if (filter !== undefined) {
    const ok =
      typeof filter === 'function' ||
      (Array.isArray(filter) && filter.every((n) => typeof n === 'string')) ||
      (typeof filter === 'object' && filter !== null && !Array.isArray(filter) && typeof (filter as { prefix?: unknown }).prefix === 'string');
    if (!ok) throw bad('filter', 'a list of tensor names, { prefix: string } or a function of the name', filter);
  }
  if (rows !== undefined && (rows === null || typeof rows !== 'object')) throw bad('rows', '{ index, count }', rows);
  if (openSource !== undefined && typeof openSource !== 'function') throw bad('openSource', 'a function', openSource);
  if (signal !== undefined && !(signal instanceof AbortSignal)) throw bad('signal', 'an AbortSignal', signal);
  if (onProgress !== undefined && typeof onProgress !== 'function') throw bad('onProgress', 'a function', onProgress);
}

function allocateSlab(place: SlabPlace, bytes: number): { slab: DeviceBuffer | Uint8Array; pinned?: PinnedBuffer } {
  if (place.kind === 'device') return { slab: DeviceBuffer.alloc(bytes, { device: place.device }) };
  if (place.pinned) {
    // A pinned buffer holds at least one byte; the set's view is cut to the slab's size.
    const pinned = PinnedBuffer.alloc(Math.max(1, bytes));
    return { slab: pinned.bytes, pinned };
  }
  return { slab: new Uint8Array(new ArrayBuffer(bytes)) };
}

/** Reads every span, files interleaved so that all of them start at once; fails fast. */
async function readSpans(cp: Checkpoint, plan: LoadPlan, slab: DeviceBuffer | Uint8Array, pinned: PinnedBuffer | undefined, place: SlabPlace, options: LoadTensorsOptions): Promise<FileLoadRecord[]> {
  const records: FileLoadRecord[] = cp.files.map((f) => ({ path: f.path, operations: 0, ops: 0, bytes: 0, routes: {}, fallbacks: [], direct: false }));
  const queue = interleave(plan.spans, cp.files.length);
  const target: Memory = pinned ?? slab;
  const inner = new AbortController();
  const onAbort = () => inner.abort(options.signal?.reason);
  options.signal?.addEventListener('abort', onAbort, { once: true });
  const done = new Array<number>(queue.length).fill(0);
  let reported = 0;
  const progress = () => {
    if (!options.onProgress) return;
    let total = 0;
    for (const d of done) total += d;
    if (total !== reported) options.onProgress((reported = total), plan.readBytes);
  };
  let next = 0;
  let failure: unknown;
  const worker = async () => {
    while (next < queue.length && failure === undefined) {
      const i = next++;
      const span = queue[i]!;
      try {
        await readSpan(cp, span, target, records[span.file]!, place, inner.signal, (n) => {
          done[i] = n;
          progress();
        });
        done[i] = span.size;
        progress();
      } catch (err) {
        if (failure === undefined) failure = err;
        inner.abort(err);
      }
    }
  };
  const width = Math.max(cp.files.length, options.concurrency ?? 16);
  try {
    await Promise.all(Array.from({ length: Math.min(width, queue.length) }, worker));
  } finally {
    options.signal?.removeEventListener('abort', onAbort);
  }
  if (failure !== undefined) {
    if (options.signal?.aborted) throw new AbortError(undefined, { cause: options.signal.reason });
    throw failure;
  }
  for (let f = 0; f < cp.files.length; f++) {
    const route = cp.files[f]!.source.route;
    // Why the file's device reads are not cuFile's comes first, even where none reached gdsThreshold.
    if (place.kind === 'device' && route?.reason && records[f]!.operations > 0) noteFallbacks(records[f]!, [route.reason], true);
  }
  return records;
}

async function readSpan(cp: Checkpoint, span: Span, target: Memory, rec: FileLoadRecord, place: SlabPlace, signal: AbortSignal, onProgress: (n: number) => void): Promise<void> {
  const src = cp.files[span.file]!.source;
  const opts = { fileOffset: span.fileOffset, size: span.size, targetOffset: span.slabOffset, signal, onProgress };
  let bytes: number;
  const recorded = src.readRecorded ? await src.readRecorded(target, opts) : undefined;
  if (recorded && isRemoteRecord(recorded)) {
    // A remote read's operations are its HTTP requests (retries included).
    bytes = recorded.bytes;
    add(rec, recorded.route, recorded.requests, bytes);
    rec.ops += recorded.requests;
  } else if (recorded) {
    const r: OpRecord = recorded;
    bytes = r.bytes;
    const mapped = mappedShareOf(r);
    add(rec, r.route, r.tasks - (mapped?.tasks ?? 0), r.bytes - (mapped?.bytes ?? 0));
    if (mapped) add(rec, 'mapped-device', mapped.tasks, mapped.bytes);
    rec.ops += r.tasks;
    if (r.direct) rec.direct = true;
    noteFallbacks(rec, r.fallbacks, false);
  } else {
    bytes = await src.read(target, opts);
    const route = place.kind === 'host' ? 'posix-host' : src.route?.device === 'cufile' ? 'cufile-unknown' : 'posix-device';
    add(rec, route, 1, bytes);
    rec.ops += 1;
  }
  rec.operations += 1;
  rec.bytes += bytes;
  if (bytes !== span.size)
    throw formatError('ERR_PENSTOCK_TENSOR_SOURCE_CHANGED', `only ${bytes} of ${span.size} bytes at offset ${span.fileOffset} could be read; the file is shorter than its header said`, { path: src.path });
}

/** Adds each of `reasons` whose code `rec` does not hold yet, at the front with `first`. */
function noteFallbacks(rec: FileLoadRecord, reasons: readonly Reason[], first: boolean): void {
  const fresh = reasons.filter((r) => !rec.fallbacks.some((f) => f.code === r.code)).map((r) => ({ ...r }));
  if (first) rec.fallbacks.unshift(...fresh);
  else rec.fallbacks.push(...fresh);
}

function add(rec: FileLoadRecord, route: keyof FileLoadRecord['routes'], ops: number, bytes: number): void {
  const c = (rec.routes[route] ??= { ops: 0, bytes: 0 });
  c.ops += ops;
  c.bytes += bytes;
}

/** Spans ordered file 0, file 1, …, file 0, …, so concurrent workers cover every file first. */
function interleave(spans: readonly Span[], files: number): Span[] {
  const per: Span[][] = Array.from({ length: files }, () => []);
  for (const s of spans) per[s.file]!.push(s);
  const out: Span[] = [];
  for (let k = 0; out.length < spans.length; k++) for (const list of per) if (k < list.length) out.push(list[k]!);
  return out;
}
