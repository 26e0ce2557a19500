/**
 * Runs one measurement in a fresh process for the suite: the first read (no earlier transfer has
 * warmed anything in penstock), or memory during one large read (no earlier allocations blur the
 * resident set). Takes a JSON request as its argument; prints one JSON line.
 */
import { performance } from 'node:perf_hooks';
import { routeDelta, type RouteCounts } from '../src/cli/bench/measure.js';
import { procStatus, resetPeakRss, RssSampler } from './memory.js';
import { gbps } from '../src/cli/bench/stats.js';
import { DeviceBuffer, open } from '../src/index.js';
import { runtimeInfo } from '../src/doctor.js';
import { stats } from '../src/measure.js';

export interface ChildRequest {
  mode: 'first-read' | 'memory';
  file: string;
  size: number;
  target: 'device' | 'host';
}

export interface ChildReport {
  error?: string;
  bytes?: number;
  seconds?: number;
  gbps?: number;
  /** Allocating the memory and opening the file (untimed in the throughput). */
  setupSeconds?: number;
  routes?: RouteCounts;
  baselineRss?: number;
  peakRssSampled?: number;
  rssSamples?: number;
  vmHwm?: number;
  /** Whether VmHWM was reset before the read, so that it is the read's own peak. */
  vmHwmReset?: boolean;
  peakAboveBaseline?: number;
  pinnedBefore?: number;
  pinnedPeak?: number;
  pinnedAfter?: number;
}

async function firstRead(req: ChildRequest): Promise<ChildReport> {
  const t0 = performance.now();
  const mem = req.target === 'device' ? DeviceBuffer.alloc(req.size) : Buffer.allocUnsafeSlow(req.size).fill(0);
  const f = await open(req.file, 'r');
  const setupSeconds = (performance.now() - t0) / 1000;
  try {
    const before = stats();
    const t1 = performance.now();
    const bytes = await f.read(mem, { size: req.size });
    const seconds = (performance.now() - t1) / 1000;
    if (bytes !== req.size) throw new Error(`read ${bytes} bytes of ${req.size}`);
    return { bytes, seconds, gbps: gbps(bytes, seconds), setupSeconds, routes: routeDelta(before, stats()) };
  } finally {
    await f.close();
    if (mem instanceof DeviceBuffer) mem.free();
  }
}

async function memory(req: ChildRequest): Promise<ChildReport> {
  const dev = DeviceBuffer.alloc(req.size);
  const f = await open(req.file, 'r');
  try {
    const pinned = () => runtimeInfo().pinnedBytes;
    const pinnedBefore = pinned();
    const baselineRss = process.memoryUsage.rss();
    const vmHwmReset = resetPeakRss();
    const before = stats();
    const t0 = performance.now();
    const sampler = new RssSampler(2, pinned).start();
    const bytes = await f.read(dev, { size: req.size });
    const s = sampler.stop();
    const seconds = (performance.now() - t0) / 1000;
    const st = procStatus();
    const peak = Math.max(s.peakRss, vmHwmReset && st.vmHwm !== undefined ? st.vmHwm : 0);
    const r: ChildReport = {
      bytes, seconds, gbps: gbps(bytes, seconds), routes: routeDelta(before, stats()), baselineRss, peakRssSampled: s.peakRss,
      rssSamples: s.samples, vmHwmReset, peakAboveBaseline: peak - baselineRss, pinnedBefore, pinnedPeak: s.peakExtra ?? pinnedBefore,
      pinnedAfter: pinned(),
    };
    if (st.vmHwm !== undefined) r.vmHwm = st.vmHwm;
    return r;
  } finally {
    await f.close();
    dev.free();
  }
}

async function main(): Promise<void> {
  let report: ChildReport;
  try {
    const req = JSON.parse(process.argv[2] ?? '') as ChildRequest;
    report = req.mode === 'memory' ? await memory(req) : await firstRead(req);
  } catch (err) {
    report = { error: (err as Error).message };
  }
  process.stdout.write(JSON.stringify(report) + '\n');
}

void main();
