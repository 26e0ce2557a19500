/**
 * The settings in force in this process: defaults, then `PENSTOCK_*` variables, then what
 * `configure()` changed. The checks that a change may happen now live with `configure()`.
 */
import { defaults, fromEnvironment, validate, type Settings } from './config.js';

let settings: Settings | undefined;

/** The settings in force (defaults, then `PENSTOCK_*` variables, then `configure()`). */
export function currentSettings(): Readonly<Settings> {
  if (!settings) settings = validate({ ...defaults(), ...fromEnvironment() });
  return settings;
}

/** Puts `next` (already validated) in force. */
export function replaceSettings(next: Settings): void {
  settings = next;
}
