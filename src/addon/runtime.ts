/**
 * Process-wide state: the lazily loaded CUDA driver and cuFile library, the
 * I/O pool, and per-GPU preparation. Everything that decides *whether* something can run lives
 * here in TypeScript; native code only does what it is told.
 */
import fs from 'node:fs';
import os from 'node:os';
import { native, type CudaStatus, type CuFileStatus, type CuFileGpuCounters, type NativeDeviceInfo } from './binding.js';
import { currentSettings } from '../settings/current.js';
import { fromNative, usage, PenstockError } from '../vocabulary/errors.js';
import { cudaProblem, cufileUnavailableReason, type Reason } from '../vocabulary/reasons.js';
import { GATHER_STAGE, POOL_SPIN_NS, poolSpinners } from '../plan/transfer-plan.js';

export { currentSettings };

let poolThreads = 0;
let spinnerCount = 0;
const prepared = new Map<number, string>();

/** Starts (or resizes) the I/O pool to the configured size. */
export function ensurePool(): void {
  const want = currentSettings().threads;
  if (poolThreads !== want) {
    spinnerCount = poolSpinners(want, os.availableParallelism());
    native().setThreads(want, POOL_SPIN_NS, spinnerCount);
    poolThreads = want;
  }
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

/** Whether GPUs can be used here, without throwing. */
export function hasGpu(): boolean {
  try {
    return cudaUnavailableReason() === undefined;
  } catch {
    return false;
  }
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

/**
 * Retains the GPU's primary context and allocates its pinned bounce buffers and streams for
 * every pool thread. Done when the device is first used (allocating a DeviceBuffer), so reads
 * never pay for it.
 */
export function prepareDevice(ordinal: number): void {
  ensurePool();
  const s = currentSettings();
  const bounce = bounceBytes();
  const key = `${poolThreads}/${bounce}/${s.inlineReadMax}`;
  if (prepared.get(ordinal) === key) return;
  checkDevice(ordinal);
  call(() => native().devicePrepare(ordinal, bounce, gpuNumaNode(ordinal), s.inlineReadMax, GATHER_STAGE));
  prepared.set(ordinal, key);
  // cuFile's driver open costs a few hundred milliseconds: pay it with the device's setup,
  // not inside somebody's first read.
  if (s.compatMode !== 'on') cufileStatus();
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
  const s = currentSettings();
  if (s.bounceBufferSize !== 'auto') return s.bounceBufferSize;
  const share = (256 * 1024 * 1024) / (s.threads * Math.max(1, deviceCount()));
  const pow2 = 2 ** Math.floor(Math.log2(Math.max(1, share)));
  return Math.min(8 << 20, Math.max(2 << 20, pow2));
}

/** Whether some GPU has been prepared in this process (CUDA is then already paid for). */
export function anyDevicePrepared(): boolean {
  return prepared.size > 0;
}

/** Runs a native call, converting what it throws into a typed error. */
export function call<T>(fn: () => T, path?: string): T {
  try {
    return fn();
  } catch (err) {
    throw fromNative(err, path);
  }
}

let cufile: CuFileStatus | undefined;

/** Loads cuFile and opens its driver once (needs a GPU); never throws. */
export function cufileStatus(): CuFileStatus {
  if (cufile && (cufile.driverOpen || cufile.driverError || !cufile.loaded)) return cufile;
  const n = native();
  let s = n.cufileStatus();
  if (!s.path) s = n.cufileLoad(currentSettings().cufileLibrary);
  if (s.loaded && hasGpu()) s = n.cufileDriverOpen(0);
  cufile = s;
  return s;
}

/** Why cuFile cannot be used at all in this process, as {code, message}, or undefined. */
export function cufileUnavailable(): Reason | undefined {
  return cufileUnavailableReason(cufileStatus(), hasGpu() ? undefined : cudaUnavailableReason());
}

/** Per-operation evidence from cuFile's level-3 counters, summed over GPUs. */
export interface CuFileEvidence {
  direct: number;
  posix: number;
}

/** Level-3 counters summed over GPUs, or null where cuFile keeps none. */
export function cufileEvidence(write: boolean): CuFileEvidence | null {
  const s = cufileStatus();
  if (s.statsLevel < 3) return null;
  const gpus: CuFileGpuCounters[] | null = native().cufileStats();
  if (!gpus) return null;
  let direct = 0;
  let posix = 0;
  for (const g of gpus) {
    direct += write ? g.nvfsWrites : g.nvfsReads + g.p2pReads;
    posix += write ? g.posixWrites : g.posixReads;
  }
  return { direct, posix };
}

/** Bytes of pinned host memory penstock holds (bounce buffers and PinnedBuffers). */
export function pinnedBytes(): number {
  return native().pinnedBytes();
}
