/**
 * Settings: defaults, `PENSTOCK_*` environment variables, and `configure()`, all checked against
 * one table (`settings-table.ts`).
 */
import { usage, type PenstockUsageError } from '../vocabulary/errors.js';
import { describe } from '../vocabulary/validate.js';
import { SETTING_NAMES, SETTINGS_TABLE, SHARED_VARIABLES, type SettingSpec } from './table.js';

export { parseSize, formatSize } from './sizes.js';

/** The codes settings checks throw, with their meanings. */
export const SETTINGS_ERROR_CODES = {
  ERR_PENSTOCK_INVALID_SETTING: 'A setting (from configure() or a PENSTOCK_* variable) has a value it does not accept; the message names it, the value and what it accepts.',
  ERR_PENSTOCK_UNKNOWN_SETTING: 'configure() was given a key that is not a setting; the message names it and suggests a near miss.',
  ERR_PENSTOCK_CONFLICTING_SETTINGS: 'Two PENSTOCK_* variables set the same setting to different values (e.g. PENSTOCK_DIRECT_IO and PENSTOCK_DIRECT_IO_READ).',
} as const;

export type { CompatMode, Settings } from './table.js';
import type { Settings } from './table.js';

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
