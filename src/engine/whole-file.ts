/** Whole-file helpers: a file into new GPU or host memory, and memory into a file. */
import { DeviceBuffer } from '../memory/device-buffer.js';
import { open, type Memory, type TransferOptions } from './file.js';
import { hostRegion } from '../memory/host-memory.js';
import { PinnedBuffer } from '../memory/pinned-buffer.js';
import { checkOptionKeys, type OptionsOf } from '../settings/option-keys.js';
import { usage } from '../vocabulary/errors.js';
import { describe } from '../vocabulary/validate.js';

/** First read size for files that report a size of 0 (procfs, sysfs): their content is read until it ends. */
const UNSIZED_FIRST_READ = 64 * 1024;

/** Options of `readFileToDevice`, `readFileToHost` and `writeFile`. */
export interface WholeFileOptions extends Pick<TransferOptions, 'signal' | 'onProgress'> {
  /** GPU ordinal for device reads (default 0). */
  device?: number;
}

/** Reads a whole file into a new DeviceBuffer on `options.device` (default GPU 0). */
export async function readFileToDevice(path: string, options: WholeFileOptions = {}): Promise<DeviceBuffer> {
  checkWhole('readFileToDevice', options);
  const file = await open(path, 'r');
  try {
    const size = await file.size();
    const buf = DeviceBuffer.alloc(size, options.device !== undefined ? { device: options.device } : {});
    try {
      const n = await file.read(buf, transfer(options));
      // The file shrank while reading: hand back only what exists.
      return n === size ? buf : buf.subarray(0, n);
    } catch (err) {
      buf.free();
      throw err;
    }
  } finally {
    await file.close();
  }
}

/** Reads a whole file into a new host Buffer, or into pinned memory with `{ pinned: true }`. */
export async function readFileToHost(path: string, options: WholeFileOptions & { pinned: true }): Promise<PinnedBuffer>;
export async function readFileToHost(path: string, options?: WholeFileOptions & { pinned?: false }): Promise<Buffer>;
export async function readFileToHost(path: string, options: WholeFileOptions & { pinned?: boolean } = {}): Promise<Buffer | PinnedBuffer> {
  checkWhole('readFileToHost', options);
  if (options.pinned !== undefined && typeof options.pinned !== 'boolean')
    throw usage('ERR_PENSTOCK_INVALID_ARGUMENT', `pinned must be a boolean, got ${describe(options.pinned)}`);
  const file = await open(path, 'r');
  try {
    const size = await file.size();
    if (size === 0) {
      // A size of 0 says nothing about the content of procfs and sysfs files: read until the end.
      const content = await readUnsized(file, transfer(options));
      if (!options.pinned) return content;
      if (content.length === 0) return PinnedBuffer.empty();
      const pinned = PinnedBuffer.alloc(content.length);
      pinned.bytes.set(content);
      return pinned;
    }
    if (options.pinned) {
      const buf = PinnedBuffer.alloc(size);
      try {
        await file.read(buf, { ...transfer(options), size });
        return buf;
      } catch (err) {
        buf.free();
        throw err;
      }
    }
    const buf = Buffer.allocUnsafeSlow(size);
    const n = await file.read(buf, transfer(options));
    return n === size ? buf : buf.subarray(0, n);
  } finally {
    await file.close();
  }
}

/** Writes `source` (GPU or host memory) to `path`, creating or truncating it. Resolves to the bytes written. */
export async function writeFile(path: string, source: Memory, options: Pick<TransferOptions, 'signal' | 'onProgress'> = {}): Promise<number> {
  checkWhole('writeFile', options);
  // The file is truncated only for a source that can be written.
  if (source instanceof DeviceBuffer) source.assertLive();
  else hostRegion(source, 'source');
  const file = await open(path, 'w');
  try {
    return await file.write(source, transfer(options));
  } finally {
    await file.close();
  }
}

/** Checks the options before the file is opened (or, for writeFile, created and truncated). */
function checkWhole(fn: OptionsOf, o: unknown): asserts o is WholeFileOptions {
  checkOptionKeys(fn, o);
  const w = (o ?? {}) as WholeFileOptions;
  if (w.device !== undefined && (typeof w.device !== 'number' || !Number.isSafeInteger(w.device) || w.device < 0))
    throw usage('ERR_PENSTOCK_INVALID_ARGUMENT', `device must be a non-negative integer, got ${describe(w.device)}`);
  if (w.onProgress !== undefined && typeof w.onProgress !== 'function')
    throw usage('ERR_PENSTOCK_INVALID_ARGUMENT', `onProgress must be a function, got ${describe(w.onProgress)}`);
  if (w.signal !== undefined && !(w.signal instanceof AbortSignal))
    throw usage('ERR_PENSTOCK_INVALID_ARGUMENT', `signal must be an AbortSignal, got ${describe(w.signal)}`);
}

function transfer(o: Pick<TransferOptions, 'signal' | 'onProgress'>): TransferOptions {
  const t: TransferOptions = {};
  if (o.signal) t.signal = o.signal;
  if (o.onProgress) t.onProgress = o.onProgress;
  return t;
}

/** Reads a file of unknown size into a Buffer, in reads that double until one comes back short. */
async function readUnsized(file: Awaited<ReturnType<typeof open>>, options: TransferOptions): Promise<Buffer> {
  const parts: Buffer[] = [];
  let at = 0;
  for (let want = UNSIZED_FIRST_READ; ; want *= 2) {
    const part = Buffer.allocUnsafeSlow(want);
    const n = await file.read(part, { ...options, fileOffset: at });
    parts.push(part.subarray(0, n));
    at += n;
    if (n < want) return Buffer.concat(parts, at);
  }
}
