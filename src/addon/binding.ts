/**
 * Loads the native addon (once) and hands out its raw surface, typed by the contract in
 * `vocabulary/native-contract.ts`.
 */
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import { PenstockError } from '../vocabulary/errors.js';
import type { NativeAddon } from '../vocabulary/native-contract.js';
import { addonLoadMessage } from './load-message.js';

export type * from '../vocabulary/native-contract.js';
export { NATIVE_FUNCTIONS, NATIVE_RESULT_FIELDS } from '../vocabulary/native-contract.js';

/** The package root: dist/src/addon/binding.js lives two levels below it. */
const packageRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

let addon: NativeAddon | undefined;

/**
 * Loads the addon once: a local build (build/Release) if there is one, else the prebuilt binary
 * for this platform (prebuilds/<platform>-<arch>), as node-gyp-build resolves them.
 */
export function native(): NativeAddon {
  if (addon) return addon;
  try {
    const require = createRequire(import.meta.url);
    const load = require('node-gyp-build') as (dir: string) => unknown;
    addon = load(packageRoot) as NativeAddon;
  } catch (cause) {
    throw new PenstockError('ERR_PENSTOCK_ADDON_LOAD', addonLoadMessage((cause as Error).message), { cause });
  }
  return addon;
}

