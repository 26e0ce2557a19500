/**
 * Loading many files (or byte ranges) into several GPUs at once: one Promise, one result per
 * shard, every shard on its own route record.
 */
import { DeviceBuffer } from '../memory/device-buffer.js';
import { AbortError, usage } from '../vocabulary/errors.js';
import { open, type PenstockFile } from './file.js';
import type { FileRoute } from './routing.js';
import { deviceCount } from '../addon/runtime.js';
import type { Route } from './stats.js';
import { checkLength, describe, isLength } from '../vocabulary/validate.js';
import { checkOptionKeys } from '../settings/option-keys.js';

/** One piece to load: a file, or a byte range of it, into a GPU. */
export interface Shard {
  /** The file to read. */
  path: string;
  /** GPU ordinal (default: shards are dealt round-robin over all GPUs). */
  device?: number;
  /** Byte offset in the file (default 0). */
  offset?: number;
  /** Bytes to load (default: to the end of the file). */
  size?: number;
  /** Load into this buffer instead of allocating one (its GPU wins over `device`). */
  target?: DeviceBuffer;
}

/** What happened to one shard (in the order given). */
export interface ShardResult {
  /** The file read. */
  path: string;
  /** The GPU it went to. */
  device: number;
  /** Where in the file the range began. */
  offset: number;
  /** The loaded bytes (a new buffer unless the shard named a target); absent on failure. */
  buffer?: DeviceBuffer;
  /** Bytes read. */
  bytes: number;
  /** Seconds from its start to its end. */
  seconds: number;
  /** Where this shard's device I/O went, and why. */
  route?: FileRoute;
  /** The route that carried this shard and its task count. */
  carried?: { route: Route; tasks: number };
  /** Why it failed, when it did (the other shards still run). */
  error?: Error;
}

/** Options of `loadShards()`. */
export interface LoadShardsOptions {
  /** Shards in flight at once (default: 2 per GPU). */
  concurrency?: number;
  /** Cancels the shards not yet done; they reject with an AbortError. */
  signal?: AbortSignal;
  /** Total bytes loaded so far over all shards. */
  onProgress?: (bytesDone: number) => void;
  /**
   * `'settle'` (default): every shard gets a result, failures carry `error`.
   * `'fail-fast'`: the first failure aborts the rest, frees what was allocated and rejects.
   */
  mode?: 'settle' | 'fail-fast';
}

/**
 * Loads every shard into its GPU concurrently. Files shared by several shards are opened once.
 * Resolves with one result per shard, in the order given.
 */
export async function loadShards(shards: Shard[], options: LoadShardsOptions = {}): Promise<ShardResult[]> {
  if (!Array.isArray(shards)) throw usage('ERR_PENSTOCK_INVALID_ARGUMENT', `shards must be an array, got ${describe(shards)}`);
  checkOptionKeys('loadShards', options);
  if (options.concurrency !== undefined && !(isLength(options.concurrency) && options.concurrency >= 1))
    throw usage('ERR_PENSTOCK_INVALID_ARGUMENT', `concurrency must be a positive integer, got ${describe(options.concurrency)}`);
  if (options.onProgress !== undefined && typeof options.onProgress !== 'function')
    throw usage('ERR_PENSTOCK_INVALID_ARGUMENT', `onProgress must be a function, got ${describe(options.onProgress)}`);
  if (options.signal !== undefined && !(options.signal instanceof AbortSignal))
    throw usage('ERR_PENSTOCK_INVALID_ARGUMENT', `signal must be an AbortSignal, got ${describe(options.signal)}`);
  if (options.mode !== undefined && options.mode !== 'settle' && options.mode !== 'fail-fast')
    throw usage('ERR_PENSTOCK_INVALID_ARGUMENT', `mode must be 'settle' or 'fail-fast', got ${describe(options.mode)}`);
  const gpus = deviceCount();
  if (shards.length > 0 && gpus === 0) throw usage('ERR_PENSTOCK_NO_CUDA', 'No usable GPU to load shards into');
  shards.forEach((s, i) => {
    if (!s || typeof s.path !== 'string') throw usage('ERR_PENSTOCK_INVALID_ARGUMENT', `shards[${i}].path must be a string`);
    if (s.offset !== undefined) checkLength(s.offset, `shards[${i}].offset`);
    if (s.size !== undefined) checkLength(s.size, `shards[${i}].size`);
    if (s.device !== undefined && (!Number.isInteger(s.device) || s.device < 0 || s.device >= gpus))
      throw usage('ERR_PENSTOCK_INVALID_DEVICE', `shards[${i}].device is ${s.device}, this machine has ${gpus} GPU(s)`);
  });
  const failFast = options.mode === 'fail-fast';
  const inner = new AbortController();
  const onOuterAbort = () => inner.abort(options.signal?.reason);
  options.signal?.addEventListener('abort', onOuterAbort, { once: true });
  if (options.signal?.aborted) inner.abort(options.signal.reason);

  const files = new Map<string, Promise<PenstockFile>>();
  const fileFor = (path: string) => {
    let f = files.get(path);
    if (!f) files.set(path, (f = open(path, 'r')));
    return f;
  };
  const doneBytes = new Array<number>(shards.length).fill(0);
  let reported = 0;
  const progress = () => {
    if (!options.onProgress) return;
    const total = doneBytes.reduce((a, b) => a + b, 0);
    if (total !== reported) options.onProgress((reported = total));
  };

  const results: ShardResult[] = new Array(shards.length);
  const runOne = async (i: number) => {
    const s = shards[i]!;
    const device = s.target?.device ?? s.device ?? i % gpus;
    const offset = s.offset ?? 0;
    const r: ShardResult = { path: s.path, device, offset, bytes: 0, seconds: 0 };
    results[i] = r;
    const t0 = performance.now();
    let allocated: DeviceBuffer | undefined;
    try {
      if (inner.signal.aborted) throw new AbortError(undefined, { cause: inner.signal.reason });
      const file = await fileFor(s.path);
      const size = s.size ?? Math.max(0, (await file.size()) - offset);
      const target = s.target ?? (allocated = DeviceBuffer.alloc(size, { device }));
      if (s.target && size > s.target.byteLength)
        throw usage('ERR_PENSTOCK_OUT_OF_RANGE', `shards[${i}] needs ${size} bytes, its target holds ${s.target.byteLength}`);
      const rec = await file.readRecorded(target, {
        fileOffset: offset,
        size,
        signal: inner.signal,
        onProgress: (n) => {
          doneBytes[i] = n;
          progress();
        },
      });
      r.bytes = rec.bytes;
      r.carried = { route: rec.route, tasks: rec.tasks };
      doneBytes[i] = r.bytes;
      progress();
      r.buffer = r.bytes === target.byteLength ? target : target.subarray(0, r.bytes);
      r.route = file.route;
    } catch (err) {
      allocated?.free();
      r.error = err as Error;
      if (failFast) inner.abort(err);
    } finally {
      r.seconds = (performance.now() - t0) / 1000;
    }
  };

  const limit = Math.max(1, options.concurrency ?? 2 * Math.max(1, gpus));
  let next = 0;
  const workers = Array.from({ length: Math.min(limit, shards.length) }, async () => {
    while (next < shards.length) await runOne(next++);
  });
  try {
    await Promise.all(workers);
  } finally {
    options.signal?.removeEventListener('abort', onOuterAbort);
    await Promise.all([...files.values()].map((f) => f.then((x) => x.close(), () => undefined)));
  }
  if (failFast) {
    const failed = results.find((r) => r.error);
    if (failed) {
      results.forEach((r, i) => {
        if (!shards[i]!.target) r.buffer?.free();
      });
      throw failed.error;
    }
  }
  return results;
}
