/** Whole-file helpers: a file into new GPU or host memory, and memory into a file. */
import { DeviceBuffer } from './device-buffer.js';
import { open, type Memory, type TransferOptions } from './file.js';
import { PinnedBuffer } from './pinned-buffer.js';

/** Options of `readFileToDevice`, `readFileToHost` and `writeFile`. */
export interface WholeFileOptions extends Pick<TransferOptions, 'signal' | 'onProgress'> {
  /** GPU ordinal for device reads (default 0). */
  device?: number;
}

/** Reads a whole file into a new DeviceBuffer on `options.device` (default GPU 0). */
export async function readFileToDevice(path: string, options: WholeFileOptions = {}): Promise<DeviceBuffer> {
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
  const file = await open(path, 'r');
  try {
    const size = await file.size();
    if (options.pinned) {
      const buf = PinnedBuffer.alloc(Math.max(1, size));
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
  const file = await open(path, 'w');
  try {
    return await file.write(source, transfer(options));
  } finally {
    await file.close();
  }
}

function transfer(o: Pick<TransferOptions, 'signal' | 'onProgress'>): TransferOptions {
  const t: TransferOptions = {};
  if (o.signal) t.signal = o.signal;
  if (o.onProgress) t.onProgress = o.onProgress;
  return t;
}
