/**
 * Runs one benchmark configuration: optional untimed warm-up, then timed repeats, each with its
 * wall time, the process's CPU time and the penstock routes that carried the bytes.
 */
import { performance } from 'node:perf_hooks';
import { ROUTES, type Route, type StatsSnapshot } from '../../engine/stats.js';
import { stats } from '../../engine/process.js';
import { mean, percentile, summarize, type Sample, type Summary } from './stats.js';

export interface RouteCount {
  /** Tasks carried by the route. */
  ops: number;
  bytes: number;
  /** Reads or writes that took the route. */
  operations: number;
  errors: number;
  /** Thread time in the route's tasks, and how much of it went to system calls and GPU copy waits. */
  busySeconds: number;
  ioSeconds: number;
  waitSeconds: number;
}

/** Only routes that carried something appear, so an empty object means no penstock I/O at all. */
export type RouteCounts = Partial<Record<Route, RouteCount>>;

export function routeDelta(before: StatsSnapshot, after: StatsSnapshot): RouteCounts {
  const out: RouteCounts = {};
  for (const r of ROUTES) {
    const a = after.routes[r];
    const b = before.routes[r];
    const d = {
      ops: a.ops - b.ops, bytes: a.bytes - b.bytes, operations: a.operations - b.operations, errors: a.errors - b.errors,
      busySeconds: a.busySeconds - b.busySeconds, ioSeconds: a.ioSeconds - b.ioSeconds, waitSeconds: a.waitSeconds - b.waitSeconds,
    };
    if (d.ops || d.bytes || d.operations || d.errors) out[r] = d;
  }
  return out;
}

/** "posix-device 256 ops" style; `fallback` names the path when penstock moved nothing. */
export function describeRoutes(routes: RouteCounts | undefined, fallback = 'no penstock I/O'): string {
  const parts: string[] = [];
  for (const r of ROUTES) {
    const c = routes?.[r];
    if (!c) continue;
    parts.push(`${r} ${c.ops} ops${c.errors ? ` (${c.errors} failed)` : ''}`);
  }
  return parts.length ? parts.join(', ') : fallback;
}

/**
 * Where penstock's thread time went, over all routes: "syscalls 64%, GPU waits 35%, other 1%".
 * "other" is penstock's own work between them (copies through scratch, issuing GPU copies).
 */
export function describeStages(routes: RouteCounts | undefined): string {
  let busy = 0, io = 0, wait = 0;
  for (const r of ROUTES) {
    const c = routes?.[r];
    if (!c) continue;
    busy += c.busySeconds;
    io += c.ioSeconds;
    wait += c.waitSeconds;
  }
  if (busy <= 0) return '';
  const pct = (x: number) => `${Math.round((100 * x) / busy)}%`;
  return [`syscalls ${pct(io)}`, ...(wait > 0 ? [`GPU waits ${pct(wait)}`] : []), `other ${pct(Math.max(0, busy - io - wait))}`].join(', ');
}

function cpuSecondsNow(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
}

export interface MeasureOptions {
  repeats: number;
  /** One untimed run before the repeats (default true): pays for first-use costs and warms caches. */
  warmup?: boolean;
  /** Runs per timed repeat; small transfers need many to rise above timer and scheduling noise. */
  iterations?: number;
  /** Untimed, before each timed repeat (dropping pages, removing the previous output). */
  prepare?: () => unknown;
  /** Untimed, after each timed repeat (fsync of written data). */
  settle?: () => unknown;
  /** One transfer; resolves to the bytes moved. */
  run: () => Promise<number>;
  onSample?: (index: number, sample: Sample) => void;
}

export interface Measurement extends Summary {
  samples: Sample[];
  repeats: number;
  iterations: number;
  routes: RouteCounts;
}

export async function measure(o: MeasureOptions): Promise<Measurement> {
  if (!Number.isInteger(o.repeats) || o.repeats < 1) throw new RangeError(`repeats must be a positive integer, got ${o.repeats}`);
  const iterations = Math.max(1, Math.floor(o.iterations ?? 1));
  if (o.warmup ?? true) {
    await o.prepare?.();
    for (let i = 0; i < iterations; i++) await o.run();
    await o.settle?.();
  }
  const samples: Sample[] = [];
  const before = stats();
  for (let r = 0; r < o.repeats; r++) {
    await o.prepare?.();
    const cpu0 = cpuSecondsNow();
    const t0 = performance.now();
    let bytes = 0;
    for (let i = 0; i < iterations; i++) bytes += await o.run();
    const seconds = (performance.now() - t0) / 1000;
    const sample: Sample = { seconds, bytes, cpuSeconds: cpuSecondsNow() - cpu0 };
    samples.push(sample);
    await o.settle?.();
    o.onSample?.(r, sample);
  }
  const routes = routeDelta(before, stats());
  return { ...summarize(samples), samples, repeats: o.repeats, iterations, routes };
}

export interface LatencyOptions {
  iterations: number;
  /** Untimed operations first. */
  warmup?: number;
  /** One operation; `i` lets the caller vary the offset. */
  run: (i: number) => Promise<unknown>;
}

export interface Latency {
  iterations: number;
  p50Us: number;
  p99Us: number;
  meanUs: number;
  minUs: number;
  maxUs: number;
  routes: RouteCounts;
}

/** Times each operation on its own; they run one after another, never overlapping. */
export async function measureLatency(o: LatencyOptions): Promise<Latency> {
  for (let i = 0; i < (o.warmup ?? Math.min(100, o.iterations)); i++) await o.run(i);
  const us: number[] = new Array<number>(o.iterations);
  const before = stats();
  for (let i = 0; i < o.iterations; i++) {
    const t0 = performance.now();
    await o.run(i);
    us[i] = (performance.now() - t0) * 1000;
  }
  return {
    iterations: o.iterations,
    p50Us: percentile(us, 50),
    p99Us: percentile(us, 99),
    meanUs: mean(us),
    minUs: Math.min(...us),
    maxUs: Math.max(...us),
    routes: routeDelta(before, stats()),
  };
}
