/**
 * The line a `bench:tensors` child writes to file descriptor 3 when its tensors are in GPU
 * memory. Imports nothing, so that the hook loaded into `penstock load` costs next to nothing.
 */

export const READY_TAG = 'PENSTOCK_BENCH_READY';

/** What a child says when its tensors are ready. Seconds on the child's own clock. */
export interface ReadyReport {
  /** From the child's process start (Node: performance.timeOrigin; Python: /proc starttime, 10 ms steps). */
  sinceStartS?: number;
  /** The loader's own clock. */
  loaderS?: number;
  /** When the CUDA context existed, from process start (where the child knows). */
  contextAtS?: number;
  [k: string]: unknown;
}

export function formatReadyLine(r: ReadyReport): string {
  return `${READY_TAG} ${JSON.stringify(r)}\n`;
}
