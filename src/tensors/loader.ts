/**
 * `loadTensors`: a checkpoint into one slab of GPU (or host) memory. Headers are parsed and
 * checked first; then one allocation; then every span is read by the engine, all files at
 * once (span-reads.ts), while the tensors' views are made.
 */
import { DeviceBuffer } from '../memory/device-buffer.js';
import { warmUpGpu } from '../addon/gpu-preparation.js';
import { AbortError, usage } from '../vocabulary/errors.js';
import { describe, isLength } from '../vocabulary/validate.js';
import { checkOptionKeys } from '../settings/option-keys.js';
import { PinnedBuffer } from '../memory/pinned-buffer.js';
import { describeCheckpoint, type Checkpoint, type CheckpointInput } from './checkpoint.js';
import { planLoad, type PlannedTensor, type RowShard, type TensorFilter } from './load-plan.js';
import type { SourceOpener } from './source.js';
import { readSpans } from './span-reads.js';
import { TensorSet, viewTensors, type FileLoadRecord, type SlabPlace, type TensorViews } from './tensor-set.js';

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
    const setSlab = pinned ? new Uint8Array(pinned.buffer, 0, plan.slabBytes) : slab;
    try {
      const reading = readSpans(cp, plan, pinned ?? slab, place, options);
      // The views are made while the reads run; the reads are waited for even if this fails, so
      // that nothing writes into the slab once it is freed.
      let views: TensorViews;
      let moved: PlannedTensor[];
      try {
        views = viewTensors(setSlab, plan.tensors, cp.files.map((f) => f.path));
        moved = plan.tensors.filter((t) => t.copyFrom !== undefined);
      } catch (err) {
        await reading.catch(() => undefined);
        throw err;
      }
      const files = await reading;
      // Tensors the reads left misaligned are copied to their aligned places.
      const bytes = pinned ? pinned.bytes : (slab as Uint8Array);
      for (const t of moved) bytes.copyWithin(t.byteOffset, t.copyFrom!, t.copyFrom! + t.byteLength);
      const metadata: Record<string, Record<string, string>> = {};
      for (const f of cp.files) if (f.metadata) metadata[f.path] = f.metadata;
      const init: ConstructorParameters<typeof TensorSet>[0] = {
        slab: setSlab, place, views, metadata, files, bytes: plan.readBytes, seconds: (performance.now() - t0) / 1e3,
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
