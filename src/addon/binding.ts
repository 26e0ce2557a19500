/**
 * Loads the native addon (once) and hands out its raw surface, typed by the contract in
 * `vocabulary/native-contract.ts`.
 */
import fs from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import process from 'node:process';
import { PenstockError } from '../vocabulary/errors.js';
import type { NativeAddon } from '../vocabulary/native-contract.js';
import { addonLoadMessage } from './load-message.js';

export type * from '../vocabulary/native-contract.js';
export { NATIVE_FUNCTIONS, NATIVE_RESULT_FIELDS } from '../vocabulary/native-contract.js';

/** The package root: dist/src/addon/binding.js lives two levels below it. */
const packageRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

/**
 * Where the addon may be, in order: a build from source (`penstock-build`, or a git clone's own
 * build), then the binary that ships for this platform. Nothing is compiled or fetched here.
 */
export function addonCandidates(root = packageRoot): string[] {
  return [
    path.join(root, 'build/Release/penstock.node'),
    path.join(root, 'prebuilds', `${process.platform}-${process.arch}`, 'penstock.glibc.node'),
  ];
}

let addon: NativeAddon | undefined;

/** Loads the addon once, from the first of {@link addonCandidates} that loads. */
export function native(): NativeAddon {
  if (addon) return addon;
  const require = createRequire(import.meta.url);
  const tried: string[] = [];
  for (const file of addonCandidates()) {
    if (!fs.existsSync(file)) {
      tried.push(`${file}: not there`);
      continue;
    }
    try {
      addon = require(file) as NativeAddon;
      return addon;
    } catch (cause) {
      tried.push(`${file}: ${(cause as Error).message.split('\n')[0]}`);
    }
  }
  throw new PenstockError('ERR_PENSTOCK_ADDON_LOAD', addonLoadMessage(tried));
}
