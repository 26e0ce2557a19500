/**
 * The settings table: for every setting its environment variable, default, parser, constraint
 * and one-line meaning. Defaults, environment parsing, validation, `penstock info` and the
 * README's settings table are all produced from it.
 */
import os from 'node:os';
import type { CompatMode, Settings } from './config.js';
import { parseSize } from './sizes.js';

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
    doc: "O_DIRECT for staged and host reads; 'auto': reads of 64 MiB+ whose range is mostly uncached.",
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

/** The settings table as Markdown (what the README shows between its `settings` markers). */
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
