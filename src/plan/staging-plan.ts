/**
 * How much pinned staging penstock holds per GPU: the bounce buffer of each I/O worker and the
 * gather stage, from the settings, the number of GPUs and the work at hand. Pure: the runtime
 * asks these and allocates what they say.
 */
import type { Settings } from '../settings/table.js';
import { GATHER_MIN, GATHER_STAGE } from './transfer-plan.js';

const MiB = 1024 * 1024;
/** Pinned bounce memory 'auto' shares out over the workers of every GPU. */
export const AUTO_BOUNCE_TOTAL = 256 * MiB;
/** 'auto' bounce buffers per worker are a power of two in this range. */
export const AUTO_BOUNCE_MIN = 2 * MiB;
export const AUTO_BOUNCE_MAX = 8 * MiB;

/**
 * Bytes of bounce buffer per worker and GPU: the setting, or under 'auto' the power of two that
 * shares {@link AUTO_BOUNCE_TOTAL} over `threads` workers on each of `devices` GPUs, within
 * [{@link AUTO_BOUNCE_MIN}, {@link AUTO_BOUNCE_MAX}].
 */
export function bounceBufferBytes(s: Pick<Settings, 'bounceBufferSize' | 'threads'>, devices: number): number {
  if (s.bounceBufferSize !== 'auto') return s.bounceBufferSize;
  const share = AUTO_BOUNCE_TOTAL / (s.threads * Math.max(1, devices));
  const pow2 = 2 ** Math.floor(Math.log2(Math.max(1, share)));
  return Math.min(AUTO_BOUNCE_MAX, Math.max(AUTO_BOUNCE_MIN, pow2));
}

/**
 * The pinned staging `work` bytes of device I/O can use at once: one bounce buffer per worker
 * up to the pool size (a worker's buffer holds two halves of `half` bytes), and a gather stage no
 * larger than the work, in whole MiB (`work` unknown: every worker and the full stage).
 */
export function stagingFor(work: number | undefined, threads: number, half: number): { slots: number; gather: number } {
  if (work === undefined || !Number.isFinite(work) || work <= 0) return { slots: threads, gather: GATHER_STAGE };
  const slots = Math.max(1, Math.min(threads, Math.ceil(work / half)));
  const gather = work < GATHER_MIN ? 0 : Math.min(GATHER_STAGE, Math.ceil(work / GATHER_MIN) * GATHER_MIN);
  return { slots, gather };
}
