/**
 * A one-line progress bar for long transfers. It draws only on a terminal and only once a
 * transfer has run for a moment, so short runs and logs piped to files stay clean.
 */
import { performance } from 'node:perf_hooks';
import { formatGBps } from './format.js';

export interface ProgressOptions {
  label: string;
  total: number;
  stream?: NodeJS.WriteStream;
  /** Draw nothing before this many milliseconds have passed (default 300). */
  delayMs?: number;
  /** Force on or off; default: on when the stream is a TTY. */
  enabled?: boolean;
}

export class ProgressBar {
  readonly #label: string;
  readonly #total: number;
  readonly #stream: NodeJS.WriteStream;
  readonly #delayMs: number;
  readonly #enabled: boolean;
  readonly #start = performance.now();
  #lastDraw = 0;
  #drawn = false;

  constructor(o: ProgressOptions) {
    this.#label = o.label;
    this.#total = o.total;
    this.#stream = o.stream ?? process.stderr;
    this.#delayMs = o.delayMs ?? 300;
    this.#enabled = o.enabled ?? Boolean(this.#stream.isTTY);
  }

  /** Suitable as an `onProgress` callback. */
  readonly update = (done: number): void => {
    if (!this.#enabled) return;
    const now = performance.now();
    const elapsed = now - this.#start;
    // Redrawing more than ~10 times a second costs time inside the measurement for nothing.
    if (elapsed < this.#delayMs || now - this.#lastDraw < 100) return;
    this.#lastDraw = now;
    this.#drawn = true;
    this.#stream.write(`\r${renderBar(this.#label, done, this.#total, elapsed / 1000, this.#stream.columns ?? 80)}`);
  };

  /** Erases the bar, leaving the cursor at the start of a clean line. */
  finish(): void {
    if (this.#drawn) this.#stream.write('\r\x1b[2K');
    this.#drawn = false;
  }
}

/** The bar's text, fitted to `columns`. */
export function renderBar(label: string, done: number, total: number, seconds: number, columns = 80): string {
  const frac = total > 0 ? Math.min(1, Math.max(0, done / total)) : 0;
  const rate = seconds > 0 ? done / 1e9 / seconds : 0;
  const tail = ` ${(frac * 100).toFixed(0).padStart(3)}% ${formatGBps(rate)} GB/s`;
  const room = Math.max(10, columns - 1 - label.length - tail.length - 3);
  const width = Math.min(40, room);
  const full = Math.round(frac * width);
  return `${label} [${'#'.repeat(full)}${'.'.repeat(width - full)}]${tail}`.slice(0, Math.max(1, columns - 1));
}
