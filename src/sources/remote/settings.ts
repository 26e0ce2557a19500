/**
 * The settings of remote reads: rows of the one settings table (`settings-table.ts`), so their
 * defaults, `PENSTOCK_REMOTE_*` variables, checks, `configure()` and `penstock info` are the same
 * as every other setting's. Here only which rows they are, and an object's settings from them.
 */
import { checkSetting, type Settings } from '../../settings/config.js';
import { currentSettings } from '../../addon/runtime.js';
import { autoRemoteWorkers } from '../../settings/table.js';

/** The names of the settings that shape remote reads. */
export const REMOTE_SETTING_NAMES = ['remoteConcurrency', 'remoteRangeSize', 'remoteRetries', 'remoteTimeoutMs', 'remoteRetryBaseMs', 'remoteWorkers'] as const satisfies readonly (keyof Settings)[];

/** Settings that shape remote reads (see {@link Settings} for each). */
export type RemoteSettings = Pick<Settings, (typeof REMOTE_SETTING_NAMES)[number]>;

/** An object's remote settings with `'auto'` resolved. */
export type ResolvedRemoteSettings = Omit<RemoteSettings, 'remoteWorkers'> & { remoteWorkers: number };

/**
 * One object's settings: those in force (defaults, then `PENSTOCK_*` variables, then
 * `configure()`), then the ones in `changes` (the object's options); each checked.
 * `remoteWorkers: 'auto'` becomes a count for this machine, or 0 when `mainThreadOnly` (an
 * object opened with a `lookup` function, which cannot be sent to a worker).
 */
export function remoteSettings(changes: Partial<RemoteSettings> = {}, mainThreadOnly = false): ResolvedRemoteSettings {
  const current = currentSettings();
  const out = {} as Record<keyof RemoteSettings, unknown>;
  for (const name of REMOTE_SETTING_NAMES) {
    const v = changes[name] ?? current[name];
    checkSetting(name, v);
    out[name] = v;
  }
  if (out.remoteWorkers === 'auto') out.remoteWorkers = mainThreadOnly ? 0 : autoRemoteWorkers();
  return out as ResolvedRemoteSettings;
}
