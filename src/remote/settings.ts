/**
 * The settings of remote reads: rows of the one settings table (`settings-table.ts`), so their
 * defaults, `PENSTOCK_REMOTE_*` variables, checks, `configure()` and `penstock info` are the same
 * as every other setting's. Here only which rows they are, and an object's settings from them.
 */
import { checkSetting, type Settings } from '../config.js';
import { currentSettings } from '../runtime.js';

/** The names of the settings that shape remote reads. */
export const REMOTE_SETTING_NAMES = ['remoteConcurrency', 'remoteRangeSize', 'remoteRetries', 'remoteTimeoutMs', 'remoteRetryBaseMs', 'remoteWorkers'] as const satisfies readonly (keyof Settings)[];

/** Settings that shape remote reads (see {@link Settings} for each). */
export type RemoteSettings = Pick<Settings, (typeof REMOTE_SETTING_NAMES)[number]>;

/**
 * One object's settings: those in force (defaults, then `PENSTOCK_*` variables, then
 * `configure()`), then the ones in `changes` (the object's options); each checked.
 */
export function remoteSettings(changes: Partial<RemoteSettings> = {}): RemoteSettings {
  const current = currentSettings();
  const out = {} as Record<keyof RemoteSettings, unknown>;
  for (const name of REMOTE_SETTING_NAMES) {
    const v = changes[name] ?? current[name];
    checkSetting(name, v);
    out[name] = v;
  }
  return out as RemoteSettings;
}
