/** Test data: files and buffers of random bytes, made fast enough for multi-gigabyte sizes. */
import { randomFillSync } from 'node:crypto';
import fs from 'node:fs';
import type { DeviceBuffer } from '../../memory/device-buffer.js';

const CHUNK = 16 * 1024 * 1024;

let block: Buffer | undefined;

/** One random 16 MiB block, made once: generating gigabytes of randomness would dominate setup. */
function randomBlock(): Buffer {
  if (!block) block = randomFillSync(Buffer.allocUnsafeSlow(CHUNK));
  return block;
}

/**
 * Fills `target` with the random block, each 16 MiB chunk stamped with its index so that no two
 * chunks are equal (nothing below can deduplicate or compress the data away).
 */
export function fillRandom(target: Uint8Array, seed = 0): void {
  const src = randomBlock();
  for (let off = 0, i = 0; off < target.length; off += CHUNK, i++) {
    const n = Math.min(CHUNK, target.length - off);
    target.set(n === CHUNK ? src : src.subarray(0, n), off);
    stamp(target, off, n, seed + i);
  }
}

function stamp(target: Uint8Array, off: number, n: number, index: number): void {
  const view = new DataView(target.buffer, target.byteOffset + off, Math.min(n, 8));
  if (view.byteLength === 8) view.setFloat64(0, index);
}

export interface CreateOptions {
  /** Called with the bytes written so far. */
  onProgress?: (done: number) => void;
  /** fsync before returning (default true): dirty pages would be written back during the benchmark. */
  sync?: boolean;
  /**
   * Create the file, failing if anything (a symlink too) is at the path, with mode 0600
   * (default false: create or truncate, following symlinks, mode 0644).
   */
  exclusive?: boolean;
}

/** Writes `size` random bytes to `path` (created, or truncated unless exclusive) in 16 MiB writes. */
export async function createTestFile(path: string, size: number, o: CreateOptions = {}): Promise<void> {
  const c = fs.constants;
  const fh = o.exclusive
    ? await fs.promises.open(path, c.O_CREAT | c.O_EXCL | c.O_NOFOLLOW | c.O_WRONLY, 0o600)
    : await fs.promises.open(path, 'w', 0o644);
  try {
    const chunk = Buffer.allocUnsafeSlow(Math.min(CHUNK, Math.max(1, size)));
    for (let off = 0, i = 0; off < size; off += CHUNK, i++) {
      const n = Math.min(CHUNK, size - off);
      fillRandom(chunk.subarray(0, n), i);
      let done = 0;
      while (done < n) done += (await fh.write(chunk, done, n - done, off + done)).bytesWritten;
      o.onProgress?.(off + n);
    }
    if (o.sync ?? true) await fh.sync();
  } finally {
    await fh.close();
  }
}

/** Fills GPU memory with random data through a host chunk, for write benchmarks. */
export async function fillDevice(target: DeviceBuffer): Promise<void> {
  const chunk = Buffer.allocUnsafeSlow(Math.min(CHUNK, Math.max(1, target.byteLength)));
  for (let off = 0, i = 0; off < target.byteLength; off += CHUNK, i++) {
    const n = Math.min(CHUNK, target.byteLength - off);
    fillRandom(chunk.subarray(0, n), i);
    await target.copyFrom(chunk.subarray(0, n), { offset: off });
  }
}
