/**
 * Settings: defaults, `PENSTOCK_*` environment variables, and `configure()`.
 */
import os from 'node:os';
import { usage } from './errors.js';

/** How penstock uses cuFile. */
export type CompatMode = 'auto' | 'on' | 'off';

export interface Settings {
  /**
   * `'auto'` (default): use cuFile where it loads, opens and accepts the file; else the staged
   * path, with the reason recorded. `'on'`: never touch cuFile. `'off'`: cuFile is required and
   * any failure to use it is an error saying why.
   */
  compatMode: CompatMode;
  /** Worker threads in penstock's I/O pool. Default: the machine's cores, at least 4, at most 64. */
  threads: number;
  /** Bytes per task: operations are split into tasks of this size. Default 4 MiB. */
  taskSize: number;
  /** Device reads and writes smaller than this take the staged path even where cuFile works. Default 16 KiB. */
  gdsThreshold: number;
  /**
   * Pinned staging bytes per worker thread and GPU (two halves, for overlap). Default `'auto'`:
   * 256 MiB shared out over threads × GPUs, as a power of two from 2 to 8 MiB (8 MiB for 16
   * threads and one GPU). Staging is fastest while its whole footprint stays small enough to
   * be served largely from the CPU caches; measured in docs/performance.md.
   */
  bounceBufferSize: number | 'auto';
  /**
   * O_DIRECT for staged and host reads. `'auto'` (default): reads of 64 MiB or more whose range
   * is mostly not in the page cache (sampled with mincore) bypass it, which reads a cold file
   * faster and does not push other data out of the cache; warm data is read from the cache.
   * `true`: always; `false`: never.
   */
  directIoRead: boolean | 'auto';
  /** Use O_DIRECT for staged and host writes. Default false. */
  directIoWrite: boolean;
  /**
   * Tasks of one buffered write in flight at once. Linux serialises buffered writes into one
   * file on its inode lock, so more writers only queue (and spin) behind it. `'auto'` (default):
   * at most 4 (see docs/performance.md); O_DIRECT writes always use every thread.
   */
  writeThreads: number | 'auto';
  /**
   * Warm reads into the GPU: one worker registers the file's page-cache pages with CUDA and
   * lets the GPU copy straight out of them, from the range's end, while the staged path works
   * from its front (route `mapped-device`). It needs far less CPU, but registering stalls the
   * other threads' CUDA calls: measured faster with one or two threads, slower with four or
   * more (docs/performance.md). `'auto'` (default): with `threads` at most 2, for reads of
   * 64 MiB or more whose range is in the page cache; `true`: whenever the range allows it (any
   * size, any residency, any thread count); `false`: never.
   */
  mappedReads: boolean | 'auto';
  /**
   * Host reads of large tasks go through a small cache-resident scratch buffer and are copied out
   * with streaming (non-temporal) stores, which moves less through DRAM than a plain pread into a
   * large buffer; buffered host writes are copied into such scratch before each pwrite, so the
   * kernel's copy (one writer at a time, under the inode lock) reads from the cache (see
   * docs/performance.md). Default true; false reads and writes straight from the caller's memory.
   */
  hostStaging: boolean;
  /** Path or soname of the CUDA driver library. Default `libcuda.so.1`. */
  cudaLibrary: string;
  /** Path or soname of the cuFile library. Default `libcufile.so.0`. */
  cufileLibrary: string;
}

const UNITS: Record<string, number> = {
  '': 1, b: 1, k: 1024, kb: 1000, kib: 1024, m: 1024 ** 2, mb: 1000 ** 2, mib: 1024 ** 2,
  g: 1024 ** 3, gb: 1000 ** 3, gib: 1024 ** 3, t: 1024 ** 4, tb: 1000 ** 4, tib: 1024 ** 4,
};

/** Parses `4MiB`, `16k`, `1GB`, `4096` into bytes. */
export function parseSize(text: string | number): number {
  if (typeof text === 'number') return text;
  const m = /^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$/.exec(text);
  const unit = m ? UNITS[m[2]!.toLowerCase()] : undefined;
  if (!m || unit === undefined) throw usage('ERR_PENSTOCK_INVALID_SETTING', `Not a size: '${text}' (try 4MiB, 64KiB, 1GiB)`);
  return Math.round(Number(m[1]) * unit);
}

/** Formats bytes with a binary unit: `4 MiB`. */
export function formatSize(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = bytes;
  let i = 0;
  while (v >= 1024 && i < units.length - 1 && Number.isInteger(v / 1024)) {
    v /= 1024;
    i++;
  }
  if (i === 0 && bytes >= 1024) {
    while (v >= 1024 && i < units.length - 1) {
      v /= 1024;
      i++;
    }
    return `${v.toFixed(1)} ${units[i]}`;
  }
  return `${v} ${units[i]}`;
}

function defaultThreads(): number {
  const cores = typeof os.availableParallelism === 'function' ? os.availableParallelism() : os.cpus().length;
  return Math.min(64, Math.max(4, cores));
}

export function defaults(): Settings {
  return {
    compatMode: 'auto',
    threads: defaultThreads(),
    taskSize: 4 * 1024 * 1024,
    gdsThreshold: 16 * 1024,
    bounceBufferSize: 'auto',
    directIoRead: 'auto',
    directIoWrite: false,
    writeThreads: 'auto',
    mappedReads: 'auto',
    hostStaging: true,
    cudaLibrary: 'libcuda.so.1',
    cufileLibrary: 'libcufile.so.0',
  };
}

function parseBool(name: string, v: string): boolean {
  if (/^(1|true|yes|on)$/i.test(v)) return true;
  if (/^(0|false|no|off)$/i.test(v)) return false;
  throw usage('ERR_PENSTOCK_INVALID_SETTING', `${name}='${v}' is not a boolean (use 1/0, true/false)`);
}

/** Settings named by `PENSTOCK_*` environment variables. */
export function fromEnvironment(env: NodeJS.ProcessEnv = process.env): Partial<Settings> {
  const s: Partial<Settings> = {};
  const v = (k: string) => {
    const x = env[k];
    return x === undefined || x === '' ? undefined : x;
  };
  let x: string | undefined;
  if ((x = v('PENSTOCK_COMPAT_MODE')) !== undefined) s.compatMode = x.toLowerCase() as CompatMode;
  if ((x = v('PENSTOCK_THREADS')) !== undefined) s.threads = Number(x);
  if ((x = v('PENSTOCK_TASK_SIZE')) !== undefined) s.taskSize = parseSize(x);
  if ((x = v('PENSTOCK_GDS_THRESHOLD')) !== undefined) s.gdsThreshold = parseSize(x);
  if ((x = v('PENSTOCK_BOUNCE_BUFFER_SIZE')) !== undefined) s.bounceBufferSize = x.toLowerCase() === 'auto' ? 'auto' : parseSize(x);
  if ((x = v('PENSTOCK_DIRECT_IO')) !== undefined) s.directIoRead = s.directIoWrite = parseBool('PENSTOCK_DIRECT_IO', x);
  if ((x = v('PENSTOCK_DIRECT_IO_READ')) !== undefined)
    s.directIoRead = x.toLowerCase() === 'auto' ? 'auto' : parseBool('PENSTOCK_DIRECT_IO_READ', x);
  if ((x = v('PENSTOCK_DIRECT_IO_WRITE')) !== undefined) s.directIoWrite = parseBool('PENSTOCK_DIRECT_IO_WRITE', x);
  if ((x = v('PENSTOCK_HOST_STAGING')) !== undefined) s.hostStaging = parseBool('PENSTOCK_HOST_STAGING', x);
  if ((x = v('PENSTOCK_WRITE_THREADS')) !== undefined) s.writeThreads = x.toLowerCase() === 'auto' ? 'auto' : Number(x);
  if ((x = v('PENSTOCK_MAPPED_READS')) !== undefined)
    s.mappedReads = x.toLowerCase() === 'auto' ? 'auto' : parseBool('PENSTOCK_MAPPED_READS', x);
  if ((x = v('PENSTOCK_CUDA_LIBRARY')) !== undefined) s.cudaLibrary = x;
  if ((x = v('PENSTOCK_CUFILE_LIBRARY')) !== undefined) s.cufileLibrary = x;
  return s;
}

/** Checks a complete settings object; throws ERR_PENSTOCK_INVALID_SETTING naming the bad field. */
export function validate(s: Settings): Settings {
  const bad = (field: string, why: string) => usage('ERR_PENSTOCK_INVALID_SETTING', `Invalid setting ${field}: ${why}`);
  if (!['auto', 'on', 'off'].includes(s.compatMode)) throw bad('compatMode', `'${s.compatMode}' (expected auto, on or off)`);
  if (!Number.isInteger(s.threads) || s.threads < 1 || s.threads > 1024) throw bad('threads', `${s.threads} (an integer from 1 to 1024)`);
  const pow2ish = (n: number) => Number.isSafeInteger(n) && n > 0;
  if (!pow2ish(s.taskSize) || s.taskSize % 4096 !== 0) throw bad('taskSize', `${s.taskSize} (a positive multiple of 4096)`);
  if (!Number.isSafeInteger(s.gdsThreshold) || s.gdsThreshold < 0) throw bad('gdsThreshold', `${s.gdsThreshold}`);
  if (s.bounceBufferSize !== 'auto' && (!pow2ish(s.bounceBufferSize) || s.bounceBufferSize % 8192 !== 0 || s.bounceBufferSize < 64 * 1024))
    throw bad('bounceBufferSize', `${s.bounceBufferSize} ('auto', or a multiple of 8 KiB, at least 64 KiB)`);
  if (s.directIoRead !== 'auto' && typeof s.directIoRead !== 'boolean') throw bad('directIoRead', "not a boolean or 'auto'");
  if (s.writeThreads !== 'auto' && (!Number.isInteger(s.writeThreads) || s.writeThreads < 1 || s.writeThreads > 1024))
    throw bad('writeThreads', `${s.writeThreads} ('auto', or an integer from 1 to 1024)`);
  if (s.mappedReads !== 'auto' && typeof s.mappedReads !== 'boolean') throw bad('mappedReads', "not a boolean or 'auto'");
  for (const k of ['directIoWrite', 'hostStaging'] as const) if (typeof s[k] !== 'boolean') throw bad(k, 'not a boolean');
  for (const k of ['cudaLibrary', 'cufileLibrary'] as const)
    if (typeof s[k] !== 'string' || s[k].length === 0) throw bad(k, 'an empty path');
  return s;
}
