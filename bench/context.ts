/**
 * The suite's shared state: options, the report being built, and writing it out after every
 * step, so an interrupted run still leaves everything measured so far on disk.
 */
import fs from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { describeRoutes, type Latency, type RouteCounts } from '../src/cli/bench/measure.js';
import { formatGBps, formatSize } from '../src/cli/kit/format.js';
import type { Sample } from '../src/cli/bench/stats.js';
import type { MachineInfo } from '../src/cli/bench/system.js';

export interface SuiteOptions {
  out: string;
  dir: string;
  maxSize: number;
  quick: boolean;
  repeat: number;
  keepFiles: boolean;
  latencyIterations: number;
  only: Set<string> | undefined;
}

export type Target = 'device' | 'host';

/** One measured (or failed) configuration of one method. */
export interface Row {
  section: string;
  methodId: string;
  method: string;
  target: Target;
  op: 'read' | 'write';
  state: 'warm' | 'cold';
  size: number;
  /** penstock's thread count, or the number of concurrent fs calls for the FileHandle method. */
  threads?: number;
  taskSize?: number;
  medianGBps?: number;
  minGBps?: number;
  maxGBps?: number;
  cpuSecondsPerGB?: number;
  medianSeconds?: number;
  repeats?: number;
  iterations?: number;
  samples?: Sample[];
  /** penstock's routes for the timed repeats; empty for methods that do not use penstock. */
  routes?: RouteCounts;
  /** The path the bytes took, in words: the routes, or the Node calls a baseline makes. */
  path: string;
  error?: string;
  /** The machine limit this row is compared with, and the fraction of it reached. */
  limit?: { name: string; gbps: number; fraction: number };
  /**
   * Cold rows compared with the disk: dd's O_DIRECT rate on the same file, measured just before
   * each timed repeat, so that each repeat has its own disk rate from the same moment.
   */
  pairedDiskGBps?: number[];
  /** Batched rows: ranges read per second (median). */
  rangesPerSecond?: number;
}

export interface LimitEntry {
  name: string;
  what: string;
  size?: number;
  gbps?: number;
  minGBps?: number;
  maxGBps?: number;
  path: string;
  error?: string;
}

export interface LatencyRow extends Latency {
  target: Target;
  method: string;
  size: number;
  path: string;
}

export interface TargetRow {
  name: string;
  want: string;
  measured: string;
  status: 'pass' | 'miss' | 'not measured' | 'not comparable';
  note?: string;
}

export interface SuiteReport {
  tool: 'penstock benchmark suite';
  started: string;
  finished?: string;
  durationSeconds?: number;
  machine: MachineInfo & { gpu: unknown; gpuSkipReason?: string; fileSystem: string; dir: string };
  settings: unknown;
  options: Omit<SuiteOptions, 'only'> & { only?: string[] };
  coldMethod?: string;
  limits: LimitEntry[];
  results: Row[];
  latency: LatencyRow[];
  memory?: unknown;
  firstRead?: unknown;
  skipped: { what: string; reason: string }[];
  targets: TargetRow[];
  notes: string[];
}

export class Suite {
  readonly opts: SuiteOptions;
  readonly report: SuiteReport;
  readonly #t0 = performance.now();
  #render: ((r: SuiteReport) => { markdown: string; svg: string }) | undefined;

  constructor(opts: SuiteOptions, report: SuiteReport) {
    this.opts = opts;
    this.report = report;
    fs.mkdirSync(opts.out, { recursive: true });
  }

  /** Sections run unless `--only` names others. */
  wants(section: string): boolean {
    return !this.opts.only || this.opts.only.has(section);
  }

  setRenderer(render: (r: SuiteReport) => { markdown: string; svg: string }): void {
    this.#render = render;
  }

  log(msg: string): void {
    const t = ((performance.now() - this.#t0) / 1000).toFixed(1).padStart(6);
    process.stdout.write(`[${t}s] ${msg}\n`);
  }

  add(row: Row): void {
    this.report.results.push(row);
    const where = `${row.section} | ${row.method} | ${formatSize(row.size)}${row.threads ? ` | ${row.threads} threads` : ''}${row.taskSize ? ` | task ${formatSize(row.taskSize)}` : ''}`;
    if (row.error) this.log(`${where}: FAILED: ${row.error}`);
    else
      this.log(
        `${where}: ${formatGBps(row.medianGBps)} GB/s (min ${formatGBps(row.minGBps)}, max ${formatGBps(row.maxGBps)}; ${row.path})`,
      );
    this.writeJson();
  }

  skip(what: string, reason: string): void {
    this.report.skipped.push({ what, reason });
    this.log(`skipped: ${what}: ${reason}`);
    this.writeJson();
  }

  elapsedSeconds(): number {
    return (performance.now() - this.#t0) / 1000;
  }

  writeJson(): void {
    writeAtomic(path.join(this.opts.out, 'results.json'), JSON.stringify(this.report, null, 2) + '\n');
  }

  /** Everything: JSON, the Markdown tables and the chart. */
  flush(): void {
    this.writeJson();
    if (!this.#render) return;
    const { markdown, svg } = this.#render(this.report);
    writeAtomic(path.join(this.opts.out, 'table.md'), markdown);
    writeAtomic(path.join(this.opts.out, 'throughput.svg'), svg);
  }
}

/** Readers (a person refreshing the file mid-run) never see half a file. */
function writeAtomic(file: string, text: string): void {
  const tmp = `${file}.tmp-${process.pid}`;
  fs.writeFileSync(tmp, text);
  fs.renameSync(tmp, file);
}

export function pathOf(routes: RouteCounts | undefined, baseline: string | undefined): string {
  return baseline ?? describeRoutes(routes);
}
