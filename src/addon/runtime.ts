/**
 * Process-wide state: the lazily loaded CUDA driver and the I/O pool (GPU preparation is in
 * gpu-preparation.ts, cuFile in cufile-driver.ts). Everything that decides *whether* something can run lives
 * here in TypeScript; native code only does what it is told.
 */
import fs from 'node:fs';
import os from 'node:os';
import { native, type CudaStatus, type NativeDeviceInfo } from './binding.js';
import { currentSettings } from '../settings/current.js';
import { fromNative, usage, PenstockError } from '../vocabulary/errors.js';
import { cudaProblem } from '../vocabulary/reasons.js';
import { POOL_SPIN_NS, poolSpinners } from '../plan/transfer-plan.js';
import { bounceBufferBytes } from '../plan/staging-plan.js';

export { currentSettings };

let poolThreads = 0;
let spinnerCount = 0;

/** Starts (or resizes) the I/O pool to the configured size. */
export function ensurePool(): void {
  const want = currentSettings().threads;
  if (poolThreads !== want) {
    spinnerCount = poolSpinners(want, os.availableParallelism());
    native().setThreads(want, POOL_SPIN_NS, spinnerCount);
    poolThreads = want;
  }
}

/** Pool threads, as last set by {@link ensurePool} (0 before). */
export function poolThreadCount(): number {
  return poolThreads;
}

/** Pool workers that watch the queue before they sleep, as last set by {@link ensurePool} (0 before). */
export function poolSpinnerCount(): number {
  return spinnerCount;
}

let cuda: CudaStatus | undefined;

/**
 * Loads and initialises the CUDA driver once; never throws. The answer cannot change once the
 * load was tried, so it is kept: device operations ask on every call.
 */
export function cudaStatus(): CudaStatus {
  if (cuda) return cuda;
  const n = native();
  const s = n.cudaStatus();
  return (cuda = s.path ? s : n.cudaLoad(currentSettings().cudaLibrary));
}

/** A sentence saying why device memory cannot be used, or undefined when it can. */
export function cudaUnavailableReason(s: CudaStatus = cudaStatus()): string | undefined {
  return cudaProblem(s);
}

/** Throws `ERR_PENSTOCK_NO_CUDA` (or the CUDA error) when device memory cannot be used. */
export function requireCuda(): CudaStatus {
  const s = cudaStatus();
  const why = cudaUnavailableReason(s);
  if (why) {
    if (s.loaded && !s.initialized && s.initError && s.initError.code !== 'CUDA_ERROR_NO_DEVICE') {
      const e = fromNative(s.initError);
      e.message = `No usable GPU: ${why}`;
      throw e;
    }
    throw new PenstockError('ERR_PENSTOCK_NO_CUDA', `No usable GPU: ${why}`);
  }
  return s;
}

/**
 * Whether GPUs can be used here. "No" is an answer only when the driver or the GPUs are missing;
 * what keeps the question from being asked at all is thrown instead, so that a health check
 * cannot report "no GPU" when the truth is otherwise: `ERR_PENSTOCK_ADDON_LOAD` when the native
 * addon cannot be loaded, `ERR_PENSTOCK_INVALID_SETTING` (or `_CONFLICTING_SETTINGS`) when a
 * PENSTOCK_* variable is unusable.
 */
export function hasGpu(): boolean {
  return cudaUnavailableReason() === undefined;
}

/** The number of usable GPUs (0 without a CUDA driver). */
export function deviceCount(): number {
  return hasGpu() ? cudaStatus().deviceCount ?? 0 : 0;
}

export function checkDevice(ordinal: number): void {
  const s = requireCuda();
  if (!Number.isInteger(ordinal) || ordinal < 0 || ordinal >= (s.deviceCount ?? 0))
    throw usage('ERR_PENSTOCK_INVALID_DEVICE', `No GPU with ordinal ${ordinal} (this machine has ${s.deviceCount ?? 0})`);
}

/** A GPU's name, memory, PCI bus id and compute capability; throws `ERR_PENSTOCK_INVALID_DEVICE` for an ordinal that is not one. */
export function deviceInfo(ordinal: number): NativeDeviceInfo {
  checkDevice(ordinal);
  return call(() => native().deviceInfo(ordinal));
}

/** The NUMA node sysfs gives for a GPU's PCI device, or -1 (no NUMA, or not known). */
export function gpuNumaNode(ordinal: number): number {
  try {
    const bus = native().deviceInfo(ordinal).pciBusId.toLowerCase();
    const n = Number(fs.readFileSync(`/sys/bus/pci/devices/${bus}/numa_node`, 'utf8').trim());
    return Number.isInteger(n) ? n : -1;
  } catch {
    return -1;
  }
}

/** The bounce-buffer size in force: the setting, or what `'auto'` resolves to on this machine. */
export function bounceBytes(): number {
  return bounceBufferBytes(currentSettings(), deviceCount());
}

/** Runs a native call, converting what it throws into a typed error. */
export function call<T>(fn: () => T, path?: string): T {
  try {
    return fn();
  } catch (err) {
    throw fromNative(err, path);
  }
}

/** Bytes of pinned host memory penstock holds (bounce buffers and PinnedBuffers). */
export function pinnedBytes(): number {
  return native().pinnedBytes();
}
