/**
 * The option keys every options-taking function accepts, in one table. A key outside its
 * function's list is refused (`ERR_PENSTOCK_UNKNOWN_OPTION`, with the nearest known key), as
 * `configure()` refuses unknown settings: a misspelt `{ offset: 5 }` for `{ fileOffset: 5 }`
 * would otherwise read from offset 0, and `{ flags: 'wx' }` would overwrite a file it was meant
 * to protect.
 */
import { usage } from '../vocabulary/errors.js';
import { describe } from '../vocabulary/validate.js';
import { suggest } from './config.js';

/** The codes the option checks throw, with their meanings. */
export const OPTION_ERROR_CODES = {
  ERR_PENSTOCK_UNKNOWN_OPTION: 'A function was given an option key it does not have (a misspelling, or an option of another function); the message names the key, suggests a near miss and lists the keys it accepts.',
} as const;

const TRANSFER = ['fileOffset', 'size', 'signal', 'onProgress'] as const;

/** Per function: the option keys it accepts. */
export const OPTION_KEYS = {
  'DeviceBuffer.alloc': ['device'],
  'DeviceBuffer.wrap': ['device'],
  'copyFrom': ['offset'],
  'copyTo': ['offset', 'size'],
  'importDeviceBuffer': ['device', 'peerAccess'],
  'openTensorManifest': ['device', 'peerAccess'],
  'open': ['mode', 'compatMode'],
  'read': [...TRANSFER, 'targetOffset'],
  'write': [...TRANSFER, 'sourceOffset'],
  'readFileToDevice': ['device', 'signal', 'onProgress'],
  'readFileToHost': ['device', 'pinned', 'signal', 'onProgress'],
  'writeFile': ['signal', 'onProgress'],
  'pageCacheResidency': ['offset', 'size'],
  'readBatch': ['file', 'signal', 'onProgress'],
  'readBatch range': ['file', 'fileOffset', 'size', 'target', 'targetOffset'],
  'loadShards': ['concurrency', 'signal', 'onProgress', 'mode'],
  'loadTensors': ['device', 'host', 'filter', 'rows', 'coalesceGap', 'concurrency', 'openSource', 'signal', 'onProgress'],
  'describeCheckpoint': ['openSource', 'signal'],
  'planLoad': ['filter', 'rows', 'coalesceGap', 'alignElements'],
  'verifyTensorSet': ['openSource'],
  'exportTensorSet': ['metadata'],
  'startServer': ['socket', 'budget', 'preload', 'allowUids', 'maxRequestBytes', 'log'],
} as const satisfies Record<string, readonly string[]>;

/** A function that takes checked options. */
export type OptionsOf = keyof typeof OPTION_KEYS;

/**
 * Checks that `options` (absent, or an object) holds only keys `fn` accepts; throws
 * `ERR_PENSTOCK_INVALID_ARGUMENT` for a non-object and `ERR_PENSTOCK_UNKNOWN_OPTION` naming the
 * first unknown key. Own enumerable string keys are what count (those that spreading copies).
 * `label` names the object in messages (default: the function, `read()`).
 */
export function checkOptionKeys(fn: OptionsOf, options: unknown, label = `${fn}()`): void {
  if (options === undefined) return;
  if (options === null || typeof options !== 'object' || Array.isArray(options))
    throw usage('ERR_PENSTOCK_INVALID_ARGUMENT', `${label} options must be an object, got ${describe(options)}`);
  const known: readonly string[] = OPTION_KEYS[fn];
  for (const key in options) {
    if (!Object.hasOwn(options, key) || known.includes(key)) continue;
    // A near spelling, else a key that holds this one or is held by it (`offset` ↔ `fileOffset`).
    const lower = key.toLowerCase();
    const near = suggest(key, known) ?? (key.length >= 3 ? known.find((k) => k.toLowerCase().includes(lower) || lower.includes(k.toLowerCase())) : undefined);
    throw usage(
      'ERR_PENSTOCK_UNKNOWN_OPTION',
      `${label} has no option '${key}'${near ? ` (did you mean '${near}'?)` : ''}; its options are ${known.join(', ')}`,
    );
  }
}
