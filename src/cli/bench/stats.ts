/**
 * Statistics for benchmark samples. Throughput uses decimal gigabytes (1 GB = 1e9 bytes), as
 * disk and bus vendors do, so the numbers compare directly with theirs.
 */

export const GB = 1e9;

export function median(values: readonly number[]): number {
  return percentile(values, 50);
}

/**
 * The p-th percentile by linear interpolation between the two nearest ranks. Interpolation keeps
 * p99 of 1000 samples from jumping to the single worst one.
 */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  if (!(p >= 0 && p <= 100)) throw new RangeError(`percentile must be within 0..100, got ${p}`);
  const sorted = [...values].sort((a, b) => a - b);
  const rank = (p / 100) * (sorted.length - 1);
  const lo = Math.floor(rank);
  const hi = Math.ceil(rank);
  const a = sorted[lo]!;
  const b = sorted[hi]!;
  return a + (b - a) * (rank - lo);
}

export function mean(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  let s = 0;
  for (const v of values) s += v;
  return s / values.length;
}

export function gbps(bytes: number, seconds: number): number {
  return seconds > 0 ? bytes / GB / seconds : Number.POSITIVE_INFINITY;
}

/** One timed repeat. */
export interface Sample {
  seconds: number;
  bytes: number;
  /** User plus system CPU time of the whole process (all threads) during the repeat. */
  cpuSeconds: number;
}

export interface Summary {
  medianGBps: number;
  minGBps: number;
  maxGBps: number;
  /** CPU seconds spent per GB moved, over all repeats together. */
  cpuSecondsPerGB: number;
  medianSeconds: number;
}

export function summarize(samples: readonly Sample[]): Summary {
  if (samples.length === 0) throw new RangeError('no samples to summarize');
  const rates = samples.map((s) => gbps(s.bytes, s.seconds));
  let bytes = 0;
  let cpu = 0;
  for (const s of samples) {
    bytes += s.bytes;
    cpu += s.cpuSeconds;
  }
  return {
    medianGBps: median(rates),
    minGBps: Math.min(...rates),
    maxGBps: Math.max(...rates),
    cpuSecondsPerGB: bytes > 0 ? cpu / (bytes / GB) : Number.NaN,
    medianSeconds: median(samples.map((s) => s.seconds)),
  };
}
