/**
 * The process-wide face of the engine: settings in force and their changes, counters, what was
 * found at run time, GPU memory, and page-cache helpers for measurements.
 */
import fs from 'node:fs';
import { promisify } from 'node:util';
import { native } from '../addon/binding.js';
import { openRegularFile } from './open-regular.js';
import { checkOptionKeys } from '../settings/option-keys.js';
import { checkChanges, type Settings } from '../settings/config.js';
import { configure as configureRuntime } from './configure.js';
import { bounceBytes, call, checkDevice, cudaStatus, currentSettings, deviceCount, deviceInfo, hasGpu, pinnedBytes } from '../addon/runtime.js';
import { cufileOpenPlan, cufileStatus } from '../addon/cufile-driver.js';
import type { CuFileOpenPlan } from '../plan/cufile-open.js';
import { globalStats, type StatsSnapshot } from './stats.js';
import { systemError, usage } from '../vocabulary/errors.js';
import { checkLength, describe } from '../vocabulary/validate.js';

export { hasGpu, deviceCount, deviceInfo };

/** Changes settings (see {@link Settings}); returns the settings now in force. */
export function configure(changes: Partial<Settings>): Readonly<Settings> {
  return { ...configureRuntime(checkChanges(changes)) };
}

/** The settings in force: defaults, then `PENSTOCK_*` environment variables, then `configure()`. */
export function getConfig(): Readonly<Settings> {
  return { ...currentSettings() };
}

/** Process-wide operations by route (and per GPU). */
export function stats(): StatsSnapshot {
  return globalStats.snapshot();
}

/** Zeroes the process-wide counters. */
export function resetStats(): void {
  globalStats.reset();
}

/** What penstock found at run time: the CUDA driver, cuFile, the pool and pinned memory. */
export function runtimeInfo(): {
  cuda: ReturnType<typeof cudaStatus>;
  cufile: ReturnType<typeof cufileStatus>;
  /** Whether penstock opens cuFile's driver at the first GPU use, and why not where it does not. */
  cufileOpen: CuFileOpenPlan;
  threads: number;
  /** Bounce-buffer bytes per worker and GPU in force (what `'auto'` resolved to). */
  bounceBufferSize: number;
  pinnedBytes: number;
} {
  const cuda = cudaStatus();
  return {
    cuda,
    cufile: cufileStatus(),
    cufileOpen: cufileOpenPlan(),
    threads: native().poolInfo().threads || currentSettings().threads,
    bounceBufferSize: bounceBytes(),
    pinnedBytes: pinnedBytes(),
  };
}

/**
 * The fraction of a file's pages (sampled evenly over the part of the range inside the file)
 * that are in the page cache, or -1 where it cannot be told (nothing of the range lies inside the
 * file). `offset` and `size` are non-negative integers; `size` defaults to the rest of the file.
 */
export async function pageCacheResidency(path: string, options: { offset?: number; size?: number } = {}): Promise<number> {
  if (options === null || typeof options !== 'object') throw usage('ERR_PENSTOCK_INVALID_ARGUMENT', 'options must be an object');
  checkOptionKeys('pageCacheResidency', options);
  const offset = options.offset ?? 0;
  checkLength(offset, 'offset');
  if (options.size !== undefined) checkLength(options.size, 'size');
  return withReadOnly(path, async (fd) => {
    const size = options.size ?? Math.max(0, fs.fstatSync(fd).size - offset);
    return native().residency(fd, offset, size, 1024);
  });
}

/** Drops a file's clean pages from the page cache (posix_fadvise DONTNEED), for cold measurements. */
export async function dropPageCache(path: string): Promise<void> {
  await withReadOnly(path, async (fd) => {
    await promisify(fs.fdatasync)(fd);
    call(() => native().dropCache(fd), path);
  });
}

/** Runs `fn` on the file opened read-only (a regular file, found without blocking); fs errors become PenstockSystemErrors. */
async function withReadOnly<T>(path: string, fn: (fd: number) => Promise<T>): Promise<T> {
  if (typeof path !== 'string' || path.length === 0) throw usage('ERR_PENSTOCK_INVALID_ARGUMENT', `path must be a non-empty string, got ${describe(path)}`);
  const fd = await openRegularFile(path, fs.constants.O_RDONLY);
  try {
    return await fn(fd);
  } catch (err) {
    throw (err as NodeJS.ErrnoException).syscall ? systemError(err as NodeJS.ErrnoException) : err;
  } finally {
    fs.closeSync(fd);
  }
}

/** Free and total memory of a GPU, in bytes. */
export function memoryInfo(device = 0): { free: number; total: number } {
  checkDevice(device);
  return call(() => native().memGetInfo(device));
}

/** Operations started and not yet settled, process-wide. */
export function inflight(): number {
  return native().inflight();
}

/** Whether a GPU is usable (alias kept short for scripts). */
export const gpuAvailable = hasGpu;
