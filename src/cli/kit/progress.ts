/**
 * A one-line progress bar for long transfers. It draws only on a terminal and only once a
 * transfer has run for a moment, so short runs and logs piped to files stay clean.
 */
import { performance } from 'node:perf_hooks';
import { formatGBps } from './format.js';

/** What a bar draws on: a terminal stream, or anything shaped like one. */
export interface ProgressStream {
  /** Writes text. */
  write(text: string): unknown;
  /** True on a terminal; bars draw nothing elsewhere. */
  isTTY?: boolean;
  /** The terminal's width (0 or missing: unknown). */
  columns?: number;
}

/** How a {@link ProgressBar} is drawn. */
export interface ProgressOptions {
  /** Text before the bar. */
  label: string;
  /** The count that means done (bytes, usually). */
  total: number;
  /** Where to draw (default stderr). */
  stream?: ProgressStream;
  /** Draw nothing before this many milliseconds have passed (default 300). */
  delayMs?: number;
  /** False turns it off; it never draws on a stream that is not a terminal. */
  enabled?: boolean;
}

/** A progress bar on one terminal line, redrawn at most ten times a second. */
export class ProgressBar {
  readonly #label: string;
  #total: number;
  readonly #stream: ProgressStream;
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
    this.#enabled = o.enabled !== false && this.#stream.isTTY === true;
  }

  /** Suitable as an `onProgress` callback; a `total` given here replaces the one given at first. */
  readonly update = (done: number, total?: number): void => {
    if (!this.#enabled) return;
    if (total !== undefined) this.#total = total;
    const now = performance.now();
    const elapsed = now - this.#start;
    // Redrawing more than ~10 times a second costs time inside the measurement for nothing.
    if (elapsed < this.#delayMs || now - this.#lastDraw < 100) return;
    this.#lastDraw = now;
    const text = renderBar(this.#label, done, this.#total, elapsed / 1000, this.#stream.columns);
    if (text === '') return;
    this.#drawn = true;
    this.#stream.write(`\r\x1b[2K${text}`);
  };

  /** Erases the bar, leaving the cursor at the start of a clean line. */
  finish(): void {
    if (this.#drawn) this.#stream.write('\r\x1b[2K');
    this.#drawn = false;
  }
}

/**
 * The bar's text, fitted into `columns` - 1 characters (the last column would wrap on some
 * terminals). Parts are dropped as room runs out: first the bar, then the label, then the rate;
 * with no room even for the percentage it is empty. `columns` 0 or unknown (some terminals and
 * emulators report 0) counts as 80.
 */
export function renderBar(label: string, done: number, total: number, seconds: number, columns?: number): string {
  const room = (columns && columns > 0 ? columns : 80) - 1;
  const frac = total > 0 ? Math.min(1, Math.max(0, done / total)) : 0;
  const rate = seconds > 0 ? done / 1e9 / seconds : 0;
  const pct = `${(frac * 100).toFixed(0).padStart(3)}%`;
  const tail = ` ${pct} ${formatGBps(rate)} GB/s`;
  const barWidth = Math.min(40, room - label.length - tail.length - 3);
  if (barWidth >= 10) {
    const full = Math.round(frac * barWidth);
    return `${label} [${'#'.repeat(full)}${'.'.repeat(barWidth - full)}]${tail}`;
  }
  for (const text of [`${label}${tail}`, tail.trimStart(), pct]) if (text.length <= room) return text;
  return '';
}
