/**
 * Getting a GPU ready for penstock's I/O, in the order a fresh process can overlap it with its
 * own work: the CUDA driver and the primary context on a background thread (while headers are
 * read), then the per-worker streams at once, then pinned staging sized to the work on a
 * background thread (reads allocate what they need first themselves), and cuFile's driver as
 * its plan says.
 */
import { native } from './binding.js';
import { startCufile, cufileSettled } from './cufile-driver.js';
import { bounceBytes, call, checkDevice, currentSettings, ensurePool, gpuNumaNode, poolThreadCount } from './runtime.js';
import { stagingFor } from '../plan/staging-plan.js';

interface Prepared {
  key: string;
  numaNode: number;
  /** Workers whose bounce buffers a fill has been asked for, and the gather stage asked for. */
  slots: number;
  gather: number;
  /** The last fill asked for (settled: never rejects). */
  fill: Promise<void>;
}

const prepared = new Map<number, Prepared>();
const warming = new Map<number, Promise<void>>();

/**
 * Loads the CUDA driver and retains GPU `ordinal`'s primary context on a background thread
 * (a few hundred milliseconds in a fresh process), so that the caller can read headers and plan
 * meanwhile. Never rejects: what failed (no driver, no such GPU) is reported, typed, by the
 * first use of the GPU after it.
 */
export function warmUpGpu(ordinal: number): Promise<void> {
  let w = warming.get(ordinal);
  if (!w) {
    w = native()
      .cudaWarmup(currentSettings().cudaLibrary, ordinal)
      .catch(() => undefined);
    warming.set(ordinal, w);
  }
  return w;
}

/**
 * Makes GPU `ordinal` ready for device I/O: the context and every pool worker's stream at once
 * (cheap), the pinned staging for `work` bytes (unknown: all of it) on a background thread, and
 * cuFile's driver as its plan says. Reads that start before the staging is filled allocate their
 * own worker's buffer first, so nothing waits for the fill.
 */
export function prepareDevice(ordinal: number, work?: number): void {
  ensurePool();
  const s = currentSettings();
  const half = bounceBytes();
  const threads = poolThreadCount();
  const key = `${threads}/${half}/${s.inlineReadMax}`;
  const want = stagingFor(work, threads, half);
  let p = prepared.get(ordinal);
  if (p?.key !== key) {
    checkDevice(ordinal);
    const numaNode = p?.numaNode ?? gpuNumaNode(ordinal);
    call(() => native().devicePrepare(ordinal, half, numaNode, s.inlineReadMax, want.gather));
    p = { key, numaNode, slots: 0, gather: want.gather, fill: Promise.resolve() };
    prepared.set(ordinal, p);
    startCufile(s.compatMode, ordinal);
  } else if (want.gather > p.gather) {
    // Records the larger stage wanted; the fill below gives it.
    call(() => native().devicePrepare(ordinal, half, p!.numaNode, s.inlineReadMax, want.gather));
    p.gather = want.gather;
  } else if (want.slots <= p.slots) {
    return;
  }
  p.slots = Math.max(p.slots, want.slots);
  // A failed fill leaves reads to allocate (and report) what they need themselves.
  p.fill = native().deviceFill(ordinal, p.slots).catch(() => undefined);
}

/**
 * Prepares GPU `device` completely and resolves once it is: the CUDA context, pinned staging for
 * every I/O worker, and cuFile's driver where its plan opens it. A process that loads later (a
 * server before its first request) can pay the set-up ahead; loads never need it.
 */
export async function prepareGpu(device = 0): Promise<void> {
  await warmUpGpu(device);
  prepareDevice(device);
  await prepared.get(device)!.fill;
  await cufileSettled();
}

/** Whether some GPU has been prepared in this process (CUDA is then already paid for). */
export function anyDevicePrepared(): boolean {
  return prepared.size > 0;
}
