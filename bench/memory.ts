/**
 * Memory during a transfer: resident set sampled on a timer (the event loop is free while
 * penstock's threads move data), and the kernel's own high-water mark, VmHWM, which catches peaks
 * between samples.
 */
import fs from 'node:fs';

/** VmRSS and VmHWM from /proc/self/status, in bytes. */
export function procStatus(): { vmRss?: number; vmHwm?: number } {
  try {
    const text = fs.readFileSync('/proc/self/status', 'utf8');
    const kb = (name: string) => {
      const m = new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(text);
      return m ? Number(m[1]) * 1024 : undefined;
    };
    const out: { vmRss?: number; vmHwm?: number } = {};
    const rss = kb('VmRSS');
    const hwm = kb('VmHWM');
    if (rss !== undefined) out.vmRss = rss;
    if (hwm !== undefined) out.vmHwm = hwm;
    return out;
  } catch {
    return {};
  }
}

/**
 * Resets VmHWM to the current RSS (Linux: "5" to clear_refs). Returns whether it took, so a
 * report never presents a lifetime peak as the peak of one transfer.
 */
export function resetPeakRss(): boolean {
  try {
    fs.writeFileSync('/proc/self/clear_refs', '5');
  } catch {
    return false;
  }
  const s = procStatus();
  return s.vmHwm !== undefined && s.vmRss !== undefined && s.vmHwm <= s.vmRss + 4 * 1024 * 1024;
}

export interface SamplerResult {
  samples: number;
  peakRss: number;
  /** Peak of the extra gauge (e.g. pinned bytes), when one was given. */
  peakExtra?: number;
}

export class RssSampler {
  readonly #intervalMs: number;
  readonly #extra: (() => number) | undefined;
  #timer: NodeJS.Timeout | undefined;
  #samples = 0;
  #peakRss = 0;
  #peakExtra = 0;

  constructor(intervalMs = 2, extra?: () => number) {
    this.#intervalMs = intervalMs;
    this.#extra = extra;
  }

  #sample(): void {
    this.#samples++;
    this.#peakRss = Math.max(this.#peakRss, process.memoryUsage.rss());
    if (this.#extra) this.#peakExtra = Math.max(this.#peakExtra, this.#extra());
  }

  start(): this {
    this.#sample();
    this.#timer = setInterval(() => this.#sample(), this.#intervalMs);
    return this;
  }

  stop(): SamplerResult {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
    this.#sample();
    const r: SamplerResult = { samples: this.#samples, peakRss: this.#peakRss };
    if (this.#extra) r.peakExtra = this.#peakExtra;
    return r;
  }
}
