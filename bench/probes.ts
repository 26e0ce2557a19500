/**
 * The suite's other measurements: the machine's own limits, small-read latency, and the two
 * that need a fresh process (the first read, and memory during a large read).
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { formatGBps, formatMicros, formatMiB, formatSize } from '../src/cli/kit/format.js';
import { describeRoutes, measure, measureLatency } from '../src/cli/bench/measure.js';
import { median } from '../src/cli/bench/stats.js';
import { configure, DeviceBuffer, open } from '../src/index.js';
import type { LatencyRow, Target } from './context.js';
import type { Env } from './sections.js';
import type { ChildReport, ChildRequest } from './child.js';

const KiB = 1024;

/** Reads the whole file once, untimed, so it is in the page cache. */
export async function warmFile(env: Env, file: string, size: number): Promise<void> {
  configure({ threads: env.defaults.threads, taskSize: env.defaults.taskSize });
  const f = await open(file, 'r');
  try {
    await f.read(env.buffers.host(), { size });
  } finally {
    await f.close();
  }
}

export async function limits(env: Env): Promise<void> {
  const { suite } = env;
  const size = env.sweepSize;
  const file = env.files.get(size)!;
  if (env.gpu) {
    try {
      const src = env.buffers.pinned().bytes.subarray(0, size);
      const dev = env.buffers.device();
      const m = await measure({ repeats: suite.opts.repeat, run: async () => (await dev.copyFrom(src), size) });
      suite.report.limits.push({
        name: 'pinned-to-gpu', what: 'one large copy from pinned host memory to the GPU (DeviceBuffer.copyFrom a PinnedBuffer)', size,
        gbps: m.medianGBps, minGBps: m.minGBps, maxGBps: m.maxGBps, path: 'cuMemcpy host (pinned) → device',
      });
      suite.log(`limit: pinned → GPU copy of ${formatSize(size)}: ${formatGBps(m.medianGBps)} GB/s`);
    } catch (err) {
      suite.report.limits.push({ name: 'pinned-to-gpu', what: 'pinned → GPU copy', path: 'DeviceBuffer.copyFrom(PinnedBuffer)', error: (err as Error).message });
    }
  } else suite.skip('limit: pinned → GPU copy', 'no GPU');
  try {
    configure({ threads: 16, taskSize: 4 * KiB * KiB });
    const target = env.gpu ? env.buffers.pinned() : env.buffers.host();
    const f = await open(file, 'r');
    try {
      const m = await measure({ repeats: suite.opts.repeat, run: async () => f.read(target, { size }) });
      suite.report.limits.push({
        name: 'page-cache', size, gbps: m.medianGBps, minGBps: m.minGBps, maxGBps: m.maxGBps,
        what: `parallel page-cache reads, stand-in: penstock host read at 16 threads into ${env.gpu ? 'pinned' : 'host'} memory`,
        path: describeRoutes(m.routes),
      });
      suite.log(`limit: page cache, penstock host read at 16 threads (stand-in): ${formatGBps(m.medianGBps)} GB/s`);
    } finally {
      await f.close();
    }
  } catch (err) {
    suite.report.limits.push({ name: 'page-cache', what: 'parallel page-cache reads (stand-in)', path: 'penstock posix-host', error: (err as Error).message });
  } finally {
    configure({ threads: env.defaults.threads, taskSize: env.defaults.taskSize });
  }
  suite.writeJson();
}

/** A fixed pseudo-random sequence of block offsets, the same for every method. */
function offsets(fileSize: number, block: number, n: number): number[] {
  const blocks = Math.max(1, Math.floor(fileSize / block));
  let x = 0x2545f491;
  return Array.from({ length: n }, () => {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    return (x % blocks) * block;
  });
}

export async function latency(env: Env): Promise<void> {
  const { suite } = env;
  const size = env.sweepSize;
  const file = env.files.get(size)!;
  await warmFile(env, file, size);
  const n = suite.opts.latencyIterations;
  const targets: Target[] = env.gpu ? ['device', 'host'] : ['host'];
  if (!env.gpu) suite.skip('small-read latency into the GPU', 'no GPU; host memory measured instead');
  const f = await open(file, 'r');
  const fh = await fs.promises.open(file, 'r');
  try {
    for (const target of targets)
      for (const block of [4 * KiB, 64 * KiB]) {
        const offs = offsets(size, block, n + 100);
        const push = (row: LatencyRow) => {
          suite.report.latency.push(row);
          suite.log(`latency ${row.target} ${formatSize(block)} ${row.method}: p50 ${formatMicros(row.p50Us)}, p99 ${formatMicros(row.p99Us)} (${row.path})`);
          suite.writeJson();
        };
        try {
          const dev = target === 'device' ? DeviceBuffer.alloc(block) : undefined;
          const mem = dev ?? Buffer.alloc(block);
          try {
            const l = await measureLatency({ iterations: n, warmup: 100, run: (i) => f.read(mem, { size: block, fileOffset: offs[i % offs.length]! }) });
            push({ target, method: 'penstock', size: block, path: describeRoutes(l.routes), ...l });
          } finally {
            dev?.free();
          }
          if (target === 'host') {
            const buf = Buffer.alloc(block);
            const l = await measureLatency({ iterations: n, warmup: 100, run: (i) => fh.read(buf, 0, block, offs[i % offs.length]!) });
            push({ target, method: 'FileHandle.read', size: block, path: 'one FileHandle.read on the libuv pool', ...l });
          }
        } catch (err) {
          suite.skip(`latency ${target} ${formatSize(block)}`, `failed: ${(err as Error).message}`);
        }
      }
  } finally {
    await f.close();
    await fh.close();
  }
}

function runChild(request: ChildRequest): ChildReport {
  const script = path.join(path.dirname(fileURLToPath(import.meta.url)), 'child.js');
  const r = spawnSync(process.execPath, [script, JSON.stringify(request)], { encoding: 'utf8', timeout: 300_000, maxBuffer: 16 * 1024 * 1024 });
  if (r.error) throw new Error(`child process: ${r.error.message}`);
  const last = r.stdout.trim().split('\n').pop() ?? '';
  let report: ChildReport;
  try {
    report = JSON.parse(last) as ChildReport;
  } catch {
    throw new Error(`child process exited ${r.status ?? r.signal}: ${(r.stderr || r.stdout).trim().slice(-500)}`);
  }
  if (report.error) throw new Error(report.error);
  return report;
}

export async function firstRead(env: Env): Promise<void> {
  const { suite } = env;
  const size = env.sweepSize;
  const file = env.files.get(size)!;
  const target: Target = env.gpu ? 'device' : 'host';
  if (!env.gpu) suite.skip('first read into the GPU in a fresh process', 'no GPU; host memory measured instead');
  try {
    await warmFile(env, file, size);
    const runs: ChildReport[] = [];
    for (let i = 0; i < suite.opts.repeat; i++) runs.push(runChild({ mode: 'first-read', file, size, target }));
    const rates = runs.map((r) => r.gbps!);
    suite.report.firstRead = {
      target, size, medianGBps: median(rates), minGBps: Math.min(...rates), maxGBps: Math.max(...rates),
      setupSeconds: median(runs.map((r) => r.setupSeconds!)), path: describeRoutes(runs[0]!.routes), runs,
    };
    suite.log(`first read in a fresh process, ${formatSize(size)} → ${target}: ${formatGBps(median(rates))} GB/s (median of ${runs.length} processes; ${describeRoutes(runs[0]!.routes)})`);
  } catch (err) {
    suite.report.firstRead = { target, size, error: (err as Error).message };
    suite.log(`first read in a fresh process failed: ${(err as Error).message}`);
  }
  suite.writeJson();
}

export async function memory(env: Env): Promise<void> {
  const { suite } = env;
  if (!env.gpu) return suite.skip('memory while reading into the GPU', 'no GPU');
  const size = env.sizes[env.sizes.length - 1]!;
  const file = env.files.get(size)!;
  try {
    await warmFile(env, file, size);
    const r = runChild({ mode: 'memory', file, size, target: 'device' });
    suite.report.memory = { size, ...r };
    suite.log(
      `memory, ${formatSize(size)} → GPU in a fresh process: peak RSS ${formatMiB(r.peakAboveBaseline)} above the baseline ` +
        `(${formatMiB(r.baselineRss)}), pinned ${formatMiB(r.pinnedBefore)} before, ${formatMiB(r.pinnedPeak)} at peak (${describeRoutes(r.routes)})`,
    );
  } catch (err) {
    suite.report.memory = { size, error: (err as Error).message };
    suite.log(`memory measurement failed: ${(err as Error).message}`);
  }
  suite.writeJson();
}
