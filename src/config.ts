/**
 * Settings: defaults, `PENSTOCK_*` environment variables, and `configure()`, all checked against
 * one table (`settings-table.ts`).
 */
import { usage, type PenstockUsageError } from './errors.js';
import { describe } from './validate.js';
import { SETTING_NAMES, SETTINGS_TABLE, SHARED_VARIABLES, type SettingSpec } from './settings-table.js';

export { parseSize, formatSize } from './sizes.js';

/** The codes settings checks throw, with their meanings. */
export const SETTINGS_ERROR_CODES = {
  ERR_PENSTOCK_INVALID_SETTING: 'A setting (from configure() or a PENSTOCK_* variable) has a value it does not accept; the message names it, the value and what it accepts.',
  ERR_PENSTOCK_UNKNOWN_SETTING: 'configure() was given a key that is not a setting; the message names it and suggests a near miss.',
  ERR_PENSTOCK_CONFLICTING_SETTINGS: 'Two PENSTOCK_* variables set the same setting to different values (e.g. PENSTOCK_DIRECT_IO and PENSTOCK_DIRECT_IO_READ).',
} as const;

/** How penstock uses cuFile. */
export type CompatMode = 'auto' | 'on' | 'off';

/** Every setting; the table in the README lists each one's variable, default and allowed values. */
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

/** A `PENSTOCK_*` variable whose value cannot be used. */
export interface EnvironmentProblem {
  /** `ERR_PENSTOCK_INVALID_SETTING` or `ERR_PENSTOCK_CONFLICTING_SETTINGS`. */
  code: keyof typeof SETTINGS_ERROR_CODES;
  /** The variable (for a conflict, the more specific one). */
  variable: string;
  /** Its value. */
  value: string;
  /** The sentence shown to people. */
  message: string;
}

/** The defaults, as the settings table gives them. */
export function defaults(): Settings {
  const s: Record<string, unknown> = {};
  for (const name of SETTING_NAMES) s[name] = SETTINGS_TABLE[name].default();
  return s as unknown as Settings;
}

/**
 * Reads the `PENSTOCK_*` variables of the settings table: the values they set, and every variable
 * whose value cannot be used (each named with its value), without throwing.
 */
export function readEnvironment(env: NodeJS.ProcessEnv = process.env): { settings: Partial<Settings>; problems: EnvironmentProblem[] } {
  const settings: Record<string, unknown> = {};
  const problems: EnvironmentProblem[] = [];
  const text = (name: string) => {
    const x = env[name];
    return x === undefined || x === '' ? undefined : x;
  };
  const from: Record<string, string> = {};
  for (const shared of SHARED_VARIABLES) {
    const raw = text(shared.variable);
    if (raw === undefined) continue;
    const value = shared.parse(raw);
    if (value === undefined) {
      problems.push(invalidVariable(shared.variable, raw, shared.accepts));
      continue;
    }
    for (const name of shared.settings) {
      settings[name] = value;
      from[name] = shared.variable;
    }
  }
  for (const name of SETTING_NAMES) {
    const spec = SETTINGS_TABLE[name] as SettingSpec;
    const raw = text(spec.variable);
    if (raw === undefined) continue;
    const value = spec.parse(raw);
    if (value === undefined || !spec.valid(value)) {
      problems.push(invalidVariable(spec.variable, raw, spec.accepts));
      continue;
    }
    const earlier = from[name];
    if (earlier !== undefined && settings[name] !== value) {
      problems.push({
        code: 'ERR_PENSTOCK_CONFLICTING_SETTINGS',
        variable: spec.variable,
        value: raw,
        message: `${earlier}='${env[earlier]}' and ${spec.variable}='${raw}' set ${name} to different values (unset one of them)`,
      });
      continue;
    }
    settings[name] = value;
  }
  return { settings: settings as Partial<Settings>, problems };
}

function invalidVariable(variable: string, value: string, accepts: string): EnvironmentProblem {
  return { code: 'ERR_PENSTOCK_INVALID_SETTING', variable, value, message: `${variable}='${value}' is not valid: it accepts ${accepts}` };
}

/** The settings named by `PENSTOCK_*` variables; throws for the first one that cannot be used. */
export function fromEnvironment(env: NodeJS.ProcessEnv = process.env): Partial<Settings> {
  const { settings, problems } = readEnvironment(env);
  const first = problems[0];
  if (first) {
    const more = problems.length > 1 ? ` (and ${problems.slice(1).map((p) => p.variable).join(', ')})` : '';
    throw usage(first.code, first.message + more);
  }
  return settings;
}

/**
 * Checks what `configure()` was given: a plain object whose own keys are all settings. Returns a
 * copy of it with only those keys.
 */
export function checkChanges(changes: unknown): Partial<Settings> {
  if (typeof changes !== 'object' || changes === null || Array.isArray(changes))
    throw usage('ERR_PENSTOCK_INVALID_ARGUMENT', `configure() takes an object of settings, e.g. { threads: 8 }; got ${describe(changes)}`);
  const proto = Object.getPrototypeOf(changes);
  if (proto !== Object.prototype && proto !== null)
    throw usage('ERR_PENSTOCK_INVALID_ARGUMENT', 'configure() takes a plain object of settings (its prototype was replaced, e.g. through __proto__)');
  const copy: Record<string, unknown> = {};
  for (const key of Reflect.ownKeys(changes)) {
    if (typeof key !== 'string' || !Object.hasOwn(SETTINGS_TABLE, key)) throw unknownSetting(String(key));
    copy[key] = (changes as Record<string, unknown>)[key];
  }
  return copy as Partial<Settings>;
}

function unknownSetting(key: string): PenstockUsageError {
  const near = suggest(key, SETTING_NAMES);
  return usage('ERR_PENSTOCK_UNKNOWN_SETTING', `Unknown setting '${key}'${near ? ` (did you mean '${near}'?)` : ''}; the settings are ${SETTING_NAMES.join(', ')}`);
}

/** Checks a complete settings object; throws `ERR_PENSTOCK_INVALID_SETTING` naming the bad field. */
export function validate(s: Settings): Settings {
  for (const key of Object.keys(s)) if (!Object.hasOwn(SETTINGS_TABLE, key)) throw unknownSetting(key);
  for (const name of SETTING_NAMES) checkSetting(name, s[name]);
  return s;
}

/** Checks one setting's value; throws `ERR_PENSTOCK_INVALID_SETTING` naming it and what it accepts. */
export function checkSetting<K extends keyof Settings>(name: K, value: unknown): asserts value is Settings[K] {
  const spec = SETTINGS_TABLE[name] as SettingSpec;
  if (!spec.valid(value)) throw usage('ERR_PENSTOCK_INVALID_SETTING', `Invalid setting ${name}: ${describe(value)} (it accepts ${spec.accepts})`);
}

/** The closest name within a small edit distance (or the same name in other letter case). */
export function suggest(name: string, candidates: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = Math.max(2, Math.floor(name.length / 4)) + 1;
  for (const c of candidates) {
    const d = c.toLowerCase() === name.toLowerCase() ? 0 : editDistance(name.toLowerCase(), c.toLowerCase());
    if (d < bestDistance) [best, bestDistance] = [c, d];
  }
  return best;
}

function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) row[j] = Math.min(prev[j]! + 1, row[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    prev = row;
  }
  return prev[b.length]!;
}
