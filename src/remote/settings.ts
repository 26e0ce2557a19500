/**
 * Settings of remote reads: a small declarative table (name, variable, default, parser, check),
 * so that they can join the project-wide settings table as rows.
 */
import { parseSize } from '../config.js';
import { usage } from '../errors.js';

/** Settings that shape remote reads. */
export interface RemoteSettings {
  /** Ranged GETs in flight at once per read (and connections kept alive per origin). Default 16. */
  remoteConcurrency: number;
  /** Bytes per ranged GET: a read is split into ranges of this size. Default 8 MiB. */
  remoteRangeSize: number;
  /** Attempts after the first for a request that failed transiently (429, 5xx, timeout, reset). Default 5. */
  remoteRetries: number;
  /** Milliseconds without any progress (connect, headers or body bytes) before a request is abandoned and retried. Default 30000. */
  remoteTimeoutMs: number;
  /** First retry delay in milliseconds; doubles per attempt (capped at 20 s), with full jitter. Default 100. */
  remoteRetryBaseMs: number;
  /**
   * Worker threads that make the requests and parse the answers of each object, moving the
   * bytes themselves (into the GPU through their own pinned slots). Default 0: the main thread
   * does it, which measured cheaper per GB where it was measured (docs/remote.md).
   */
  remoteWorkers: number;
}

interface Row<K extends keyof RemoteSettings> {
  key: K;
  variable: string;
  default: RemoteSettings[K];
  parse: (text: string) => RemoteSettings[K];
  /** Why the value is wrong, or undefined when it is fine. */
  check: (value: RemoteSettings[K]) => string | undefined;
}

const integer = (min: number, max: number) => (v: number) =>
  Number.isSafeInteger(v) && v >= min && v <= max ? undefined : `${v} (an integer from ${min} to ${max})`;

/** The remote settings: key, environment variable, default and validation, one row each. */
export const REMOTE_SETTINGS: readonly Row<keyof RemoteSettings>[] = [
  { key: 'remoteConcurrency', variable: 'PENSTOCK_REMOTE_CONCURRENCY', default: 16, parse: Number, check: integer(1, 1024) },
  {
    key: 'remoteRangeSize', variable: 'PENSTOCK_REMOTE_RANGE_SIZE', default: 8 * 1024 * 1024, parse: parseSize,
    check: (v) => (Number.isSafeInteger(v) && v >= 64 * 1024 && v <= 1024 ** 3 ? undefined : `${v} (from 64 KiB to 1 GiB)`),
  },
  { key: 'remoteRetries', variable: 'PENSTOCK_REMOTE_RETRIES', default: 5, parse: Number, check: integer(0, 100) },
  { key: 'remoteTimeoutMs', variable: 'PENSTOCK_REMOTE_TIMEOUT_MS', default: 30_000, parse: Number, check: integer(1, 3_600_000) },
  { key: 'remoteRetryBaseMs', variable: 'PENSTOCK_REMOTE_RETRY_BASE_MS', default: 100, parse: Number, check: integer(0, 60_000) },
  { key: 'remoteWorkers', variable: 'PENSTOCK_REMOTE_WORKERS', default: 0, parse: Number, check: integer(0, 256) },
];

let overrides: Partial<RemoteSettings> = {};

/** Checks a settings object; throws ERR_PENSTOCK_INVALID_SETTING naming the first bad field. */
export function validateRemoteSettings(s: Partial<RemoteSettings>): void {
  for (const row of REMOTE_SETTINGS) {
    const v = s[row.key];
    if (v === undefined) continue;
    const why = typeof v === 'number' ? row.check(v) : `${String(v)} (not a number)`;
    if (why) throw usage('ERR_PENSTOCK_INVALID_SETTING', `Invalid setting ${row.key}: ${why}`);
  }
}

/** Defaults, then `PENSTOCK_REMOTE_*` variables, then {@link configureRemote}, then `changes`. */
export function remoteSettings(changes: Partial<RemoteSettings> = {}, env: NodeJS.ProcessEnv = process.env): RemoteSettings {
  const s = {} as Record<keyof RemoteSettings, number>;
  for (const row of REMOTE_SETTINGS) {
    const text = env[row.variable];
    let v = row.default;
    if (text !== undefined && text !== '') {
      v = row.parse(text);
      const why = Number.isNaN(v) ? `'${text}' is not a number` : row.check(v);
      if (why) throw usage('ERR_PENSTOCK_INVALID_SETTING', `${row.variable}: ${why}`);
    }
    s[row.key] = v;
  }
  const out = { ...s, ...overrides, ...definedOnly(changes) };
  validateRemoteSettings(out);
  return out;
}

/** Changes the remote settings for this process; returns what is now in force. */
export function configureRemote(changes: Partial<RemoteSettings>): RemoteSettings {
  validateRemoteSettings(changes);
  overrides = { ...overrides, ...definedOnly(changes) };
  return remoteSettings();
}

/** Forgets every {@link configureRemote} change (tests). */
export function resetRemoteSettings(): void {
  overrides = {};
}

function definedOnly(o: Partial<RemoteSettings>): Partial<RemoteSettings> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<RemoteSettings>;
}
