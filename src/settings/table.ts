/**
 * The settings table: for every setting its environment variable, default, parser, constraint
 * and one-line meaning. Defaults, environment parsing, validation, `penstock info` and the
 * settings table of docs/settings.md are all produced from it.
 */
import os from 'node:os';
import { parseSize } from './sizes.js';

/** How penstock uses cuFile. */
export type CompatMode = 'auto' | 'on' | 'off';

/** Every setting; the table in docs/settings.md lists each one's variable, default and allowed values. */
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
   * is mostly not in the page cache (sampled with mincore) bypass it on NVMe drives, where deep
   * queues of direct reads keep the drive busy and leave the cache to other data; elsewhere the
   * page cache's readahead reads them (`route.coldReads` records which). Warm data is read from
   * the cache. `true`: always; `false`: never.
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
   * A range of a file read into a GPU a second time (1 MiB or more, from the same open file)
   * keeps its page-cache pages registered with CUDA, so that this read and every later read of
   * it is one copy by the GPU straight out of the page cache (route `mapped-device`, record
   * `kept`): no CPU copy, no staging. Kept pages are pinned: they cannot be reclaimed while
   * kept. At most this many bytes are kept in the process, least recently read ranges released
   * first; a file's ranges go when it is closed. A kept range is read only while the file's
   * size and times are those its pages were registered under. 0: never. Default 1/16 of the
   * machine's memory, at most 4 GiB (see docs/performance.md).
   */
  keptPagesMax: number;
  /**
   * Host reads of large tasks go through a small cache-resident scratch buffer and are copied out
   * with streaming (non-temporal) stores, which moves less through DRAM than a plain pread into a
   * large buffer; buffered host writes are copied into such scratch before each pwrite, so the
   * kernel's copy (one writer at a time, under the inode lock) reads from the cache (see
   * docs/performance.md). Default true; false reads and writes straight from the caller's memory.
   */
  hostStaging: boolean;
  /**
   * Reads up to this many bytes whose range is in the page cache run on the calling thread: one
   * non-blocking pread (and, into a GPU, one copy through the GPU's own inline staging, waited
   * for there), while nothing else of this thread is in flight for a GPU target. They hold the
   * event loop for that long, but skip the hand-off to a pool thread and back, which costs more
   * than reading a megabyte on the machines measured (see docs/performance.md). 0: never.
   * Default 1 MiB.
   */
  inlineReadMax: number;
  /** Path or soname of the CUDA driver library. Default `libcuda.so.1`. */
  cudaLibrary: string;
  /** Path or soname of the cuFile library. Default `libcufile.so.0`. */
  cufileLibrary: string;
  /**
   * The folder under which penstock reads the machine's facts (`/proc`, `/sys`, `/etc/cufile.json`)
   * that decide whether cuFile's driver is opened: `/` by default; another where a container sees
   * the host's under another path. Default `/`.
   */
  systemRoot: string;
  /** Remote reads: ranged GETs in flight at once per read (and connections kept alive per object). Default 16. */
  remoteConcurrency: number;
  /** Remote reads: bytes per ranged GET; a read is split into ranges of this size. Default 8 MiB. */
  remoteRangeSize: number;
  /** Remote reads: attempts after the first for a request that failed transiently (429, 5xx, timeout, reset). Default 5. */
  remoteRetries: number;
  /** Remote reads: milliseconds without any progress (connect, headers or body bytes) before a request is abandoned and retried. Default 30000. */
  remoteTimeoutMs: number;
  /** Remote reads: first retry delay in milliseconds; doubles per attempt (capped at 20 s), with full jitter. Default 100. */
  remoteRetryBaseMs: number;
  /**
   * Remote reads: worker threads (shared by every remote object of the process) that make the
   * requests and parse the answers of reads into GPU memory and SharedArrayBuffers, moving the
   * bytes themselves (into the GPU through their own pinned slots); other host memory is always
   * written on the main thread. 0: the main thread does it all. `'auto'`: one per 8 cores, at most
   * 4 (none below 8 cores), and none for an object opened with a `lookup` function. The default
   * and its measurements are in docs/remote.md.
   */
  remoteWorkers: number | 'auto';
}

/** One row of the table. */
export interface SettingSpec<K extends keyof Settings = keyof Settings> {
  /** The `PENSTOCK_*` variable that sets it. */
  readonly variable: string;
  /** The default value (computed, for those that depend on the machine). */
  readonly default: () => Settings[K];
  /** The default as the docs show it. */
  readonly defaultText: string;
  /** The values allowed, as errors and docs state them. */
  readonly accepts: string;
  /** A variable's text → value; `undefined` when the text is not one. */
  readonly parse: (text: string) => Settings[K] | undefined;
  /** Whether a value (from anywhere) is allowed. */
  readonly valid: (value: unknown) => boolean;
  /** What it does, in one line (the `Settings` interface has the full story). */
  readonly doc: string;
  /** Set for byte counts, which are shown with a unit. */
  readonly unit?: 'bytes';
}

/** A variable that sets several settings at once; the more specific variables must agree with it. */
export interface SharedVariable {
  /** The variable's name. */
  readonly variable: string;
  /** The settings it sets. */
  readonly settings: readonly (keyof Settings)[];
  /** Its text → value; `undefined` when the text is not one. */
  readonly parse: (text: string) => boolean | undefined;
  /** The values allowed. */
  readonly accepts: string;
}

const MiB = 1024 * 1024;

function parseBoolText(text: string): boolean | undefined {
  if (/^(1|true|yes|on)$/i.test(text)) return true;
  if (/^(0|false|no|off)$/i.test(text)) return false;
  return undefined;
}

function parseIntText(text: string): number | undefined {
  return /^\s*\d+\s*$/.test(text) ? Number(text) : undefined;
}

function parseSizeText(text: string): number | undefined {
  try {
    return parseSize(text);
  } catch {
    return undefined;
  }
}

function orAuto<T>(parse: (text: string) => T | undefined): (text: string) => T | 'auto' | undefined {
  return (text) => (text.trim().toLowerCase() === 'auto' ? 'auto' : parse(text));
}

const isIntIn = (min: number, max: number) => (v: unknown) => typeof v === 'number' && Number.isInteger(v) && v >= min && v <= max;
const isBool = (v: unknown) => typeof v === 'boolean';
const isAutoOr = (test: (v: unknown) => boolean) => (v: unknown) => v === 'auto' || test(v);
const isPath = (v: unknown) => typeof v === 'string' && v.length > 0 && !v.includes('\0');

function defaultThreads(): number {
  return Math.min(64, Math.max(4, availableCores()));
}

/**
 * The default of `remoteWorkers`, the one line to change if measurements say otherwise
 * (docs/remote.md): `'auto'` puts reads into GPU memory on worker threads on machines of 8 cores
 * or more, where the main thread then stays free; 0 keeps every read on the main thread.
 */
const REMOTE_WORKERS_DEFAULT: number | 'auto' = 'auto';

/**
 * What `remoteWorkers: 'auto'` is on this machine: one per 4 cores, at most 8, none below 8 cores.
 * On the 16-core H200 machine (`npm run bench:remote`, 2 GiB into the GPU): main thread 2.97
 * GB/s, 2 workers 6.56, 4 workers 11.1, 8 workers 13.0, at 0.36–0.41 CPU-s/GB each; on 2 cores
 * workers only share the cores the server and the main thread need.
 */
export function autoRemoteWorkers(cores = availableCores()): number {
  return cores < 8 ? 0 : Math.min(8, Math.floor(cores / 4));
}

/** 1/16 of the machine's memory in whole MiB, at most 4 GiB: pinned pages are memory nobody else can reclaim. */
function defaultKeptPagesMax(): number {
  return Math.min(4096 * MiB, Math.floor(os.totalmem() / 16 / MiB) * MiB);
}

function availableCores(): number {
  return typeof os.availableParallelism === 'function' ? os.availableParallelism() : os.cpus().length;
}

const COMPAT_MODES: readonly CompatMode[] = ['auto', 'on', 'off'];
const BOOL_TEXT = '1/0, true/false, yes/no, on/off';

/** Every setting, in the order the docs list them. */
export const SETTINGS_TABLE: { readonly [K in keyof Settings]: SettingSpec<K> } = {
  compatMode: {
    variable: 'PENSTOCK_COMPAT_MODE',
    default: () => 'auto',
    defaultText: 'auto',
    accepts: 'auto, on or off',
    parse: (t) => (COMPAT_MODES as readonly string[]).includes(t.toLowerCase()) ? (t.toLowerCase() as CompatMode) : undefined,
    valid: (v) => (COMPAT_MODES as readonly unknown[]).includes(v),
    doc: "cuFile use: 'auto' where it works, 'on' never (compatibility mode), 'off' required.",
  },
  threads: {
    variable: 'PENSTOCK_THREADS',
    default: defaultThreads,
    defaultText: 'cores, at least 4, at most 64',
    accepts: 'an integer from 1 to 1024',
    parse: parseIntText,
    valid: isIntIn(1, 1024),
    doc: "Worker threads in penstock's I/O pool.",
  },
  taskSize: {
    variable: 'PENSTOCK_TASK_SIZE',
    unit: 'bytes',
    default: () => 4 * MiB,
    defaultText: '4MiB',
    accepts: 'a positive multiple of 4096 bytes',
    parse: parseSizeText,
    valid: (v) => typeof v === 'number' && Number.isSafeInteger(v) && v > 0 && v % 4096 === 0,
    doc: 'Bytes per task: operations are split into tasks of this size.',
  },
  gdsThreshold: {
    variable: 'PENSTOCK_GDS_THRESHOLD',
    unit: 'bytes',
    default: () => 16 * 1024,
    defaultText: '16KiB',
    accepts: 'a non-negative integer of bytes',
    parse: parseSizeText,
    valid: (v) => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0,
    doc: 'Device transfers smaller than this take the staged path even where cuFile works.',
  },
  bounceBufferSize: {
    variable: 'PENSTOCK_BOUNCE_BUFFER_SIZE',
    unit: 'bytes',
    default: () => 'auto',
    defaultText: 'auto',
    accepts: "'auto', or a multiple of 8 KiB, at least 64 KiB",
    parse: orAuto(parseSizeText),
    valid: isAutoOr((v) => typeof v === 'number' && Number.isSafeInteger(v) && v >= 64 * 1024 && v % 8192 === 0),
    doc: "Pinned staging bytes per worker and GPU; 'auto': 256 MiB over threads × GPUs, 2 to 8 MiB.",
  },
  directIoRead: {
    variable: 'PENSTOCK_DIRECT_IO_READ',
    default: () => 'auto',
    defaultText: 'auto',
    accepts: `'auto' or a boolean (${BOOL_TEXT})`,
    parse: orAuto(parseBoolText),
    valid: isAutoOr(isBool),
    doc: "O_DIRECT for staged and host reads; 'auto': reads of 64 MiB+ whose range is mostly uncached, on NVMe drives.",
  },
  directIoWrite: {
    variable: 'PENSTOCK_DIRECT_IO_WRITE',
    default: () => false,
    defaultText: 'false',
    accepts: `a boolean (${BOOL_TEXT})`,
    parse: parseBoolText,
    valid: isBool,
    doc: 'O_DIRECT for staged and host writes.',
  },
  writeThreads: {
    variable: 'PENSTOCK_WRITE_THREADS',
    default: () => 'auto',
    defaultText: 'auto',
    accepts: "'auto', or an integer from 1 to 1024",
    parse: orAuto(parseIntText),
    valid: isAutoOr(isIntIn(1, 1024)),
    doc: "Tasks of one buffered write in flight at once; 'auto': at most 4.",
  },
  mappedReads: {
    variable: 'PENSTOCK_MAPPED_READS',
    default: () => 'auto',
    defaultText: 'auto',
    accepts: `'auto' or a boolean (${BOOL_TEXT})`,
    parse: orAuto(parseBoolText),
    valid: isAutoOr(isBool),
    doc: "Warm device reads copied from registered page-cache pages; 'auto': threads ≤ 2, 64 MiB+, cached.",
  },
  keptPagesMax: {
    variable: 'PENSTOCK_KEPT_PAGES_MAX',
    unit: 'bytes',
    default: defaultKeptPagesMax,
    defaultText: '1/16 of memory, at most 4GiB',
    accepts: 'a non-negative integer of bytes (0: never)',
    parse: parseSizeText,
    valid: (v) => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0,
    doc: 'Page-cache pages kept registered for ranges read into a GPU again, at most this many bytes (0: never).',
  },
  hostStaging: {
    variable: 'PENSTOCK_HOST_STAGING',
    default: () => true,
    defaultText: 'true',
    accepts: `a boolean (${BOOL_TEXT})`,
    parse: parseBoolText,
    valid: isBool,
    doc: 'Large host reads and buffered writes go through cache-sized scratch.',
  },
  inlineReadMax: {
    variable: 'PENSTOCK_INLINE_READ_MAX',
    unit: 'bytes',
    default: () => 1 * MiB,
    defaultText: '1MiB',
    accepts: 'bytes from 0 to 16 MiB (0: never)',
    parse: parseSizeText,
    valid: (v) => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0 && v <= 16 * MiB,
    doc: 'Cached reads up to this size run on the calling thread, skipping the pool (0: never).',
  },
  cudaLibrary: {
    variable: 'PENSTOCK_CUDA_LIBRARY',
    default: () => 'libcuda.so.1',
    defaultText: 'libcuda.so.1',
    accepts: 'a non-empty path or soname',
    parse: (t) => t,
    valid: isPath,
    doc: 'The CUDA driver library; fixed once loaded.',
  },
  cufileLibrary: {
    variable: 'PENSTOCK_CUFILE_LIBRARY',
    default: () => 'libcufile.so.0',
    defaultText: 'libcufile.so.0',
    accepts: 'a non-empty path or soname',
    parse: (t) => t,
    valid: isPath,
    doc: 'The cuFile library; fixed once loaded.',
  },
  systemRoot: {
    variable: 'PENSTOCK_SYSTEM_ROOT',
    default: () => '/',
    defaultText: '/',
    accepts: 'a non-empty path',
    parse: (t) => t,
    valid: isPath,
    doc: "The folder under which the machine's facts (/proc, /sys, /etc/cufile.json) that decide whether cuFile's driver is opened are read.",
  },
  remoteConcurrency: {
    variable: 'PENSTOCK_REMOTE_CONCURRENCY',
    default: () => 16,
    defaultText: '16',
    accepts: 'an integer from 1 to 1024',
    parse: parseIntText,
    valid: isIntIn(1, 1024),
    doc: 'Remote reads: ranged GETs in flight per read (and connections kept alive per object).',
  },
  remoteRangeSize: {
    variable: 'PENSTOCK_REMOTE_RANGE_SIZE',
    unit: 'bytes',
    default: () => 8 * MiB,
    defaultText: '8MiB',
    accepts: 'from 64 KiB to 1 GiB',
    parse: parseSizeText,
    valid: isIntIn(64 * 1024, 1024 * MiB),
    doc: 'Remote reads: bytes per ranged GET.',
  },
  remoteRetries: {
    variable: 'PENSTOCK_REMOTE_RETRIES',
    default: () => 5,
    defaultText: '5',
    accepts: 'an integer from 0 to 100',
    parse: parseIntText,
    valid: isIntIn(0, 100),
    doc: 'Remote reads: attempts after the first for a transient failure (429, 5xx, timeout, reset).',
  },
  remoteTimeoutMs: {
    variable: 'PENSTOCK_REMOTE_TIMEOUT_MS',
    default: () => 30_000,
    defaultText: '30000',
    accepts: 'an integer from 1 to 3600000',
    parse: parseIntText,
    valid: isIntIn(1, 3_600_000),
    doc: 'Remote reads: milliseconds without progress before a request is abandoned and retried.',
  },
  remoteRetryBaseMs: {
    variable: 'PENSTOCK_REMOTE_RETRY_BASE_MS',
    default: () => 100,
    defaultText: '100',
    accepts: 'an integer from 0 to 60000',
    parse: parseIntText,
    valid: isIntIn(0, 60_000),
    doc: 'Remote reads: first retry delay, doubled per attempt (capped at 20 s), full jitter.',
  },
  remoteWorkers: {
    variable: 'PENSTOCK_REMOTE_WORKERS',
    default: () => REMOTE_WORKERS_DEFAULT,
    defaultText: String(REMOTE_WORKERS_DEFAULT),
    accepts: "'auto', or an integer from 0 to 256",
    parse: orAuto(parseIntText),
    valid: isAutoOr(isIntIn(0, 256)),
    doc: "Remote reads into GPU or shared memory: worker threads doing the HTTP (0: the main thread); 'auto': cores / 4, at most 8, none below 8 cores.",
  },
};

/** Variables that set several settings; a more specific variable set to another value is a conflict. */
export const SHARED_VARIABLES: readonly SharedVariable[] = [
  { variable: 'PENSTOCK_DIRECT_IO', settings: ['directIoRead', 'directIoWrite'], parse: parseBoolText, accepts: `a boolean (${BOOL_TEXT})` },
];

/** The setting names, in table order. */
export const SETTING_NAMES = Object.keys(SETTINGS_TABLE) as (keyof Settings)[];

/** The settings table as Markdown (what docs/settings.md shows between its `settings` markers). */
export function settingsTableMarkdown(): string {
  const cell = (s: string) => s.replaceAll('|', '\\|');
  const rows = SETTING_NAMES.map((name) => {
    const spec = SETTINGS_TABLE[name] as SettingSpec;
    const shared = SHARED_VARIABLES.filter((v) => v.settings.includes(name)).map((v) => `, \`${v.variable}\``).join('');
    return `| \`${name}\` | \`${spec.variable}\`${shared} | ${cell(spec.defaultText)} | ${cell(spec.accepts)} | ${cell(spec.doc)} |`;
  });
  const notes = SHARED_VARIABLES.map(
    (v) => `\`${v.variable}\` sets ${v.settings.map((s) => `\`${s}\``).join(' and ')} at once; a more specific variable set to a different value is an error (\`ERR_PENSTOCK_CONFLICTING_SETTINGS\`).`,
  );
  return ['| setting | variable | default | accepts | meaning |', '| --- | --- | --- | --- | --- |', ...rows, '', ...notes].join('\n');
}
