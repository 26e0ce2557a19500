/** Shared test helpers: temporary files with known content, and the fake CUDA driver. */
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { digestHex } from '../src/memory/digest.js';
import { splitDev } from '../src/system/block-device.js';

// No test may wait on the EC2 instance metadata service (absent off EC2, where a lookup waits for
// its timeout): tests that want it run a fake and say so. Child processes inherit this.
process.env.AWS_EC2_METADATA_DISABLED ??= 'true';

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const fakeDriverDir = path.join(repoRoot, 'dist/fake-driver');

/**
 * Points penstock at the fake driver. Must run before penstock first loads CUDA in this process
 * (each test file runs in its own process, so doing it at the top of a file is enough).
 */
export function useFakeDriver(env: Record<string, string> = {}): void {
  process.env.PENSTOCK_CUDA_LIBRARY = path.join(fakeDriverDir, 'libcuda.so.1');
  process.env.PENSTOCK_CUFILE_LIBRARY = path.join(fakeDriverDir, 'libcufile.so.0');
  // The fake cuFile stands in for one that can move data directly, so penstock opens it.
  process.env.PENSTOCK_SYSTEM_ROOT = fakeSystemRoot({ nvidiaFs: true });
  for (const [k, v] of Object.entries(env)) process.env[k] = v;
}

/**
 * A recorded machine's root for the facts that decide whether cuFile's driver is opened: with
 * `/proc/driver/nvidia-fs/devcount` where `nvidiaFs`, and `/etc/cufile.json` holding `cufileJson`.
 */
export function fakeSystemRoot(options: { nvidiaFs: boolean; cufileJson?: object }): string {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'penstock-root-'));
  process.on('exit', () => fs.rmSync(root, { recursive: true, force: true }));
  if (options.nvidiaFs) {
    fs.mkdirSync(path.join(root, 'proc/driver/nvidia-fs'), { recursive: true });
    fs.writeFileSync(path.join(root, 'proc/driver/nvidia-fs/devcount'), '1\n');
  }
  if (options.cufileJson) {
    fs.mkdirSync(path.join(root, 'etc'), { recursive: true });
    fs.writeFileSync(path.join(root, 'etc/cufile.json'), JSON.stringify(options.cufileJson));
  }
  return root;
}

/**
 * A recorded machine's root in which the block device under `file` is the drive `name`, rotational
 * or not (its sysfs link and queue only), for plans that depend on the storage under a file.
 */
export function machineWith(file: string, name: string, rotational: boolean): string {
  const { major, minor } = splitDev(fs.statSync(file).dev);
  const root = tmpDir() + `/root-${name}-${major}-${minor}`;
  const drive = `${root}/sys/devices/virtual/block/${name}`;
  fs.mkdirSync(`${drive}/queue`, { recursive: true });
  fs.writeFileSync(`${drive}/queue/rotational`, rotational ? '1\n' : '0\n');
  fs.mkdirSync(`${root}/sys/dev/block`, { recursive: true });
  fs.rmSync(`${root}/sys/dev/block/${major}:${minor}`, { force: true });
  fs.symlinkSync(`../../devices/virtual/block/${name}`, `${root}/sys/dev/block/${major}:${minor}`);
  return root;
}

/** Sets environment switches of the fake driver for the duration of `fn`. */
export async function withEnv<T>(vars: Record<string, string | undefined>, fn: () => Promise<T>): Promise<T> {
  const saved: Record<string, string | undefined> = {};
  for (const [k, v] of Object.entries(vars)) {
    saved[k] = process.env[k];
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
  try {
    return await fn();
  } finally {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
}

let dir: string | undefined;
export function tmpDir(): string {
  if (!dir) {
    // Under the working tree's file system rather than tmpfs, so O_DIRECT is available.
    const base = fs.existsSync('/var/tmp') ? '/var/tmp' : os.tmpdir();
    dir = fs.mkdtempSync(path.join(base, 'penstock-test-'));
    process.on('exit', () => fs.rmSync(dir!, { recursive: true, force: true }));
  }
  return dir;
}

let counter = 0;
/** Deterministic, position-dependent bytes: every misplaced byte shows. */
export function pattern(size: number, seed = 1): Buffer {
  const out = Buffer.allocUnsafe(size);
  const block = 1 << 20;
  for (let off = 0, i = 0; off < size; off += block, i++) {
    const h = crypto.createHash('sha256').update(`${seed}:${i}`).digest();
    const n = Math.min(block, size - off);
    // Expand the hash into a block with an xorshift stream seeded from it.
    let x = h.readUInt32LE(0) | 1;
    for (let j = 0; j < n; j++) {
      x ^= x << 13;
      x ^= x >>> 17;
      x ^= x << 5;
      out[off + j] = x & 0xff;
    }
  }
  return out;
}

/** Creates a file of `size` pattern bytes; returns its path and content. */
export function makeFile(size: number, seed = counter + 1): { file: string; data: Buffer } {
  const file = path.join(tmpDir(), `f${++counter}-${size}.bin`);
  const data = pattern(size, seed);
  fs.writeFileSync(file, data);
  return { file, data };
}

export function newPath(name = 'out'): string {
  return path.join(tmpDir(), `${name}-${++counter}.bin`);
}

export function sha256(b: Uint8Array): string {
  return digestHex('sha256', b);
}

/** 0..n-1 in an order fixed by `seed` (a Fisher–Yates shuffle driven by a small LCG). */
export function shuffled(n: number, seed: number): number[] {
  const out = Array.from({ length: n }, (_, i) => i);
  let x = seed;
  for (let i = n - 1; i > 0; i--) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    const j = x % (i + 1);
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

/**
 * Drops `file`'s pages from the page cache for a cold read; where the kernel keeps them, skips
 * the test with the reason and returns false.
 */
export async function dropPagesOrSkip(t: { skip(message?: string): void }, file: string): Promise<boolean> {
  // Imported here, not above: a test file points penstock at its driver before penstock loads.
  const { dropPageCache, pageCacheResidency } = await import('../src/measure.js');
  await dropPageCache(file);
  const residency = await pageCacheResidency(file);
  if (residency <= 0.5) return true;
  t.skip(`the kernel kept the file's pages (${residency}): not a cold read`);
  return false;
}
