/** The options of one read or write, checked before anything is touched. */
import { usage } from '../vocabulary/errors.js';
import { checkLength, describe } from '../vocabulary/validate.js';
import { checkOptionKeys } from '../settings/option-keys.js';

/** Options shared by reads and writes. */
export interface TransferOptions {
  /** Byte offset in the file (default 0). */
  fileOffset?: number;
  /** Bytes to move (default: the rest of the buffer after its offset). */
  size?: number;
  /** Cancels the remaining tasks; the Promise then rejects with an AbortError. */
  signal?: AbortSignal;
  /** Called on the JS thread with the bytes done so far, at most once per event-loop turn. */
  onProgress?: (bytesDone: number) => void;
}

/** Options of `file.read()`. */
export interface ReadOptions extends TransferOptions {
  /** Byte offset in the target buffer (default 0). */
  targetOffset?: number;
}

/** Options of `file.write()`. */
export interface WriteOptions extends TransferOptions {
  /** Byte offset in the source buffer (default 0). */
  sourceOffset?: number;
}

/** Transfer options after validation. */
export interface ValidOptions {
  fileOffset: number;
  memOffset: number;
  size: number | undefined;
  signal: AbortSignal | undefined;
  onProgress: ((bytesDone: number) => void) | undefined;
}

/** Checks a transfer's options object (absent, or a plain object of known fields). */
export function transferOptions(options: unknown, write: boolean): ValidOptions {
  if (options === undefined) options = {};
  if (options === null || typeof options !== 'object')
    throw usage('ERR_PENSTOCK_INVALID_ARGUMENT', `options must be an object, got ${describe(options)}`);
  checkOptionKeys(write ? 'write' : 'read', options);
  const o = options as ReadOptions & WriteOptions;
  const memName = write ? 'sourceOffset' : 'targetOffset';
  const fileOffset = o.fileOffset ?? 0;
  const memOffset = (write ? o.sourceOffset : o.targetOffset) ?? 0;
  checkLength(fileOffset, 'fileOffset');
  checkLength(memOffset, memName);
  if (o.size !== undefined) checkLength(o.size, 'size');
  if (o.onProgress !== undefined && typeof o.onProgress !== 'function')
    throw usage('ERR_PENSTOCK_INVALID_ARGUMENT', 'onProgress must be a function');
  if (o.signal !== undefined && !(o.signal instanceof AbortSignal))
    throw usage('ERR_PENSTOCK_INVALID_ARGUMENT', 'signal must be an AbortSignal');
  return { fileOffset, memOffset, size: o.size, signal: o.signal, onProgress: o.onProgress };
}

/** A progress callback whose throwing cannot break the I/O: it is reported like an unhandled error. */
export function progressOf(onProgress: (bytesDone: number) => void): (bytesDone: number) => void {
  return (n: number) => {
    try {
      onProgress(n);
    } catch (err) {
      queueMicrotask(() => {
        throw err;
      });
    }
  };
}
