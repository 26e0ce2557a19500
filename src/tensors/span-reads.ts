/**
 * The reads of a load: every span of the plan into the slab, all files at once, failing fast.
 * A span is one engine operation, except that the small spans of a local file (a filter or a
 * row shard that leaves gaps wider than the coalescing gap) go together in one batch: a pread
 * each, gathered through staging on the way to a GPU, where an operation each would cost a
 * submission, a Promise and (into a GPU) a copy waited for on the JS thread.
 */
import { AbortError } from '../vocabulary/errors.js';
import { PenstockFile, type Memory } from '../engine/file.js';
import { readBatch } from '../engine/batch/batch-read.js';
import { mappedShareOf, type OpRecord } from '../engine/op-record.js';
import type { Reason } from '../vocabulary/reasons.js';
import { formatError } from '../formats/errors.js';
import { isRemoteRecord } from '../sources/source.js';
import type { Checkpoint } from './checkpoint.js';
import type { LoadPlan, Span } from './load-plan.js';
import type { FileLoadRecord, SlabPlace } from './tensor-set.js';

/**
 * Spans of a local file at most this long are read in one batch, when the file has two or more
 * of them. 5000 spans of 4 KiB (a third of the tensors of a checkpoint, read exactly) took 1.9 s
 * into a GPU of the fake driver as operations (each read inline on the JS thread and its copy
 * waited for) and 15-25 ms as one batch; into host memory 175-300 ms and 15-30 ms. Longer spans
 * keep an operation each: pipelined over the pool, with O_DIRECT, the mapped route or cuFile
 * where the plan picks them.
 */
export const BATCHED_SPAN_MAX = 1 << 20;

/** What the reads hear from the load's options. */
export interface SpanReadOptions {
  signal?: AbortSignal;
  onProgress?: (bytesDone: number, bytesTotal: number) => void;
  concurrency?: number;
}

/** One unit of work: a span as an operation, or a file's small spans as one batch. */
interface Unit {
  file: number;
  spans: Span[];
  batch: boolean;
  bytes: number;
}

/** Reads every span of `plan` into `target`, files interleaved so that all of them start at once; fails fast. */
export async function readSpans(cp: Checkpoint, plan: LoadPlan, target: Memory, place: SlabPlace, options: SpanReadOptions): Promise<FileLoadRecord[]> {
  const records: FileLoadRecord[] = cp.files.map((f) => ({ path: f.path, operations: 0, ops: 0, bytes: 0, routes: {}, fallbacks: [], direct: false }));
  const queue = interleave(unitsOf(cp, plan.spans), cp.files.length);
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
      const unit = queue[i]!;
      const onProgress = (n: number) => {
        done[i] = n;
        progress();
      };
      try {
        const rec = records[unit.file]!;
        if (unit.batch) await readBatched(cp, unit, target, rec, inner.signal, onProgress);
        else await readSpan(cp, unit.spans[0]!, target, rec, place, inner.signal, onProgress);
        done[i] = unit.bytes;
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

/** Per file: its small spans as one batch (a local file with two or more of them), first; then every other span alone. */
function unitsOf(cp: Checkpoint, spans: readonly Span[]): Unit[][] {
  const per: Span[][] = cp.files.map(() => []);
  for (const s of spans) per[s.file]!.push(s);
  return per.map((mine, f) => {
    const local = cp.files[f]!.source instanceof PenstockFile;
    const small = local ? mine.filter((s) => s.size <= BATCHED_SPAN_MAX) : [];
    const units: Unit[] = [];
    if (small.length >= 2) units.push({ file: f, spans: small, batch: true, bytes: small.reduce((n, s) => n + s.size, 0) });
    for (const s of mine) if (small.length < 2 || s.size > BATCHED_SPAN_MAX) units.push({ file: f, spans: [s], batch: false, bytes: s.size });
    return units;
  });
}

/** Units ordered file 0, file 1, …, file 0, …, so concurrent workers cover every file first. */
function interleave(per: readonly Unit[][], files: number): Unit[] {
  const out: Unit[] = [];
  const total = per.reduce((n, l) => n + l.length, 0);
  for (let k = 0; out.length < total; k++) for (let f = 0; f < files; f++) if (k < per[f]!.length) out.push(per[f]![k]!);
  return out;
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
  if (bytes !== span.size) throw shortRead(src.path, span, bytes);
}

/** A file's small spans in one batch: each span counts as an operation of the record, each pread as a task. */
async function readBatched(cp: Checkpoint, unit: Unit, target: Memory, rec: FileLoadRecord, signal: AbortSignal, onProgress: (n: number) => void): Promise<void> {
  const file = cp.files[unit.file]!.source as PenstockFile;
  const ranges = unit.spans.map((s) => ({ fileOffset: s.fileOffset, size: s.size, target, targetOffset: s.slabOffset }));
  const r = await readBatch(ranges, { file, signal, onProgress });
  // The first span that failed is the load's error (the batch reports them all, by span).
  let first = -1;
  for (const i of r.errors.keys()) if (first < 0 || i < first) first = i;
  if (first >= 0) throw r.errors.get(first);
  for (const [route, c] of Object.entries(r.record.routes) as [keyof FileLoadRecord['routes'], { ops: number; bytes: number }][]) {
    add(rec, route, c.ops, c.bytes);
    rec.ops += c.ops;
  }
  noteFallbacks(rec, r.record.fallbacks, false);
  rec.operations += unit.spans.length;
  rec.bytes += r.totalBytes;
  for (let i = 0; i < unit.spans.length; i++) if (r.bytes[i] !== unit.spans[i]!.size) throw shortRead(file.path, unit.spans[i]!, r.bytes[i]!);
}

function shortRead(path: string, span: Span, bytes: number): Error {
  return formatError('ERR_PENSTOCK_TENSOR_SOURCE_CHANGED', `only ${bytes} of ${span.size} bytes at offset ${span.fileOffset} could be read; the file is shorter than its header said`, { path });
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
