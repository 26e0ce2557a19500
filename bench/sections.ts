/** The suite's throughput sections: sweeps over size, threads and task size, writes, cold reads. */
import { describeDrop, dropFilePages } from '../src/cli/bench/cold.js';
import { formatGBps, formatSize } from '../src/cli/kit/format.js';
import { measure } from '../src/cli/bench/measure.js';
import { median } from '../src/cli/bench/stats.js';
import { ddDirectRead } from '../src/cli/bench/system.js';
import { configure } from '../src/index.js';
import { pathOf, type Row, type Suite } from './context.js';
import {
  concurrentReads, penstockRead, penstockReadStaged, penstockWrite, readFileHost, readFileThenCopy, readPinnedThenCopy, sequentialLoop,
  writeFileDevice, writeFileHost, type Buffers, type Method,
} from './methods.js';
import { penstockPromiseAll } from './size-sections.js';

const MiB = 1024 * 1024;

export interface Env {
  suite: Suite;
  gpu: boolean;
  gpuReason: string;
  /** One test file per size. */
  files: Map<number, string>;
  buffers: Buffers;
  sizes: number[];
  /** The size of the sweeps over threads and task size, and of the targets (1 GiB, or less when capped). */
  sweepSize: number;
  /** Scratch file for writes. */
  outFile: string;
  defaults: { threads: number; taskSize: number };
  threadsList: number[];
  taskSizes: number[];
}

export interface RowOptions {
  state?: 'warm' | 'cold';
  threads?: number;
  taskSize?: number;
  concurrency?: number;
  /** Untimed, before each timed repeat, after the pages are dropped. */
  beforeRepeat?: () => void;
}

/** Small transfers repeat within one timed repeat until about 256 MiB have moved (at most 256 times). */
export function iterationsFor(size: number, state: 'warm' | 'cold'): number {
  if (state === 'cold') return 1;
  return Math.max(1, Math.min(256, Math.round((256 * MiB) / size)));
}

function fileFor(env: Env, size: number): string {
  const f = env.files.get(size);
  if (!f) throw new Error(`no test file of ${formatSize(size)}`);
  return f;
}

/** Measures one method at one configuration; failures become rows with an error, never a stop. */
export async function measureRow(env: Env, section: string, m: Method, size: number, o: RowOptions = {}): Promise<Row> {
  const state = o.state ?? 'warm';
  const row: Row = { section, methodId: m.id, method: m.name, target: m.target, op: m.op, state, size, path: m.baseline ?? '' };
  if (!m.baseline) {
    row.threads = o.threads ?? env.defaults.threads;
    row.taskSize = o.taskSize ?? env.defaults.taskSize;
  } else if (o.concurrency !== undefined) {
    row.threads = o.concurrency;
  }
  let close: (() => Promise<void>) | undefined;
  try {
    configure({ threads: o.threads ?? env.defaults.threads, taskSize: o.taskSize ?? env.defaults.taskSize });
    const file = fileFor(env, size);
    const ctx = { file, out: env.outFile, size, buffers: env.buffers, ...(o.concurrency !== undefined ? { concurrency: o.concurrency } : {}) };
    const runner = await m.make(ctx);
    close = runner.close?.bind(runner);
    const drop = () => {
      const d = dropFilePages(file, 'auto');
      env.suite.report.coldMethod = describeDrop(d);
      if (!d.dropped) throw new Error(`could not drop the file's pages: ${describeDrop(d)}`);
    };
    const meas = await measure({
      repeats: env.suite.opts.repeat,
      warmup: state === 'warm',
      iterations: iterationsFor(size, state),
      prepare: async () => {
        if (state === 'cold') drop();
        o.beforeRepeat?.();
        await runner.prepare?.();
      },
      settle: runner.settle?.bind(runner),
      run: () => runner.run(),
    });
    Object.assign(row, {
      medianGBps: meas.medianGBps, minGBps: meas.minGBps, maxGBps: meas.maxGBps, cpuSecondsPerGB: meas.cpuSecondsPerGB,
      medianSeconds: meas.medianSeconds, repeats: meas.repeats, iterations: meas.iterations, samples: meas.samples, routes: meas.routes,
    });
    row.path = pathOf(meas.routes, m.baseline);
  } catch (err) {
    row.error = (err as Error).message;
  } finally {
    try {
      await close?.();
    } catch (err) {
      row.error ??= `cleanup failed: ${(err as Error).message}`;
    }
  }
  env.suite.add(row);
  return row;
}

export async function deviceReads(env: Env): Promise<void> {
  if (!env.gpu) return env.suite.skip('device reads', 'no GPU');
  env.suite.log('device reads, warm: penstock vs fs.readFile → GPU and fs read → pinned → GPU');
  for (const size of env.sizes)
    for (const m of [penstockRead('device'), penstockReadStaged, penstockPromiseAll('device'), readFileThenCopy, readPinnedThenCopy]) await measureRow(env, 'device-read', m, size);
}

export async function hostReads(env: Env): Promise<void> {
  env.suite.log(`host reads, warm: penstock vs fs.readFile, a sequential loop, 16 concurrent FileHandle.read (UV_THREADPOOL_SIZE=${process.env.UV_THREADPOOL_SIZE ?? 'default 4'})`);
  for (const size of env.sizes)
    for (const m of [penstockRead('host'), penstockPromiseAll('host'), readFileHost, sequentialLoop, concurrentReads(16)]) await measureRow(env, 'host-read', m, size);
}

export async function threadSweep(env: Env): Promise<void> {
  env.suite.log(`threads sweep at ${formatSize(env.sweepSize)}, warm`);
  for (const t of env.threadsList) {
    if (env.gpu) await measureRow(env, 'threads', penstockRead('device'), env.sweepSize, { threads: t });
    await measureRow(env, 'threads', penstockRead('host'), env.sweepSize, { threads: t });
    await measureRow(env, 'threads', concurrentReads(t), env.sweepSize, { concurrency: t });
  }
  if (!env.gpu) env.suite.skip('threads sweep into the GPU', 'no GPU');
}

export async function taskSweep(env: Env): Promise<void> {
  env.suite.log(`task size sweep at ${formatSize(env.sweepSize)}, ${env.defaults.threads} threads, warm`);
  for (const t of env.taskSizes) {
    if (env.gpu) await measureRow(env, 'task-size', penstockRead('device'), env.sweepSize, { taskSize: t });
    await measureRow(env, 'task-size', penstockRead('host'), env.sweepSize, { taskSize: t });
  }
  if (!env.gpu) env.suite.skip('task size sweep into the GPU', 'no GPU');
}

export async function writes(env: Env): Promise<void> {
  env.suite.log('writes into the page cache (fsync after each repeat, untimed): penstock vs fs.writeFile');
  if (!env.gpu) env.suite.skip('GPU → file writes', 'no GPU');
  const methods = [...(env.gpu ? [penstockWrite('device'), writeFileDevice] : []), penstockWrite('host'), writeFileHost];
  for (const size of env.sizes.filter((s) => s <= env.sweepSize)) for (const m of methods) await measureRow(env, 'write', m, size);
}

export async function coldReads(env: Env): Promise<void> {
  const file = fileFor(env, env.sweepSize);
  const probe = dropFilePages(file, 'auto');
  env.suite.report.coldMethod = describeDrop(probe);
  if (!probe.dropped) return env.suite.skip('cold reads and the disk limit', `pages cannot be dropped here: ${describeDrop(probe)}`);
  env.suite.log(`cold reads: pages dropped before every repeat by ${describeDrop(probe)}`);
  // The disk's rate drifts on shared storage: measure it before and after the cold rows and
  // take the median of both, so the comparison does not rest on one moment.
  const rates: number[] = [];
  const command = ddRates(env, file, rates);
  const sizes = env.suite.opts.quick ? [env.sweepSize] : env.sizes.filter((s) => s >= MiB && s <= env.sweepSize);
  const methods = [...(env.gpu ? [penstockRead('device'), readFileThenCopy] : []), penstockRead('host'), readFileHost];
  if (!env.gpu) env.suite.skip('cold reads into the GPU', 'no GPU');
  for (const size of sizes)
    for (const m of methods) {
      // The rows the targets compare with the disk get their own dd run before every repeat.
      const paired: number[] = [];
      const pair = size === env.sweepSize && m.id.startsWith('penstock-');
      const beforeRepeat = pair ? () => void paired.push(ddDirectRead(file).gbps) : undefined;
      const row = await measureRow(env, 'cold', m, size, { state: 'cold', ...(beforeRepeat ? { beforeRepeat } : {}) });
      if (pair && paired.length) {
        row.pairedDiskGBps = paired;
        rates.push(...paired);
        env.suite.writeJson();
      }
    }
  ddRates(env, file, rates);
  diskLimit(env, command, rates);
}

/** Measures the disk's O_DIRECT rate on the same cold file `repeat` times into `rates`. */
function ddRates(env: Env, file: string, rates: number[]): string {
  let command = '';
  try {
    for (let i = 0; i < env.suite.opts.repeat; i++) {
      dropFilePages(file, 'auto');
      const r = ddDirectRead(file);
      command = r.command;
      rates.push(r.gbps);
    }
  } catch (err) {
    env.suite.log(`limit: disk (dd O_DIRECT) failed: ${(err as Error).message}`);
  }
  return command;
}

/** The disk's O_DIRECT rate, measured on the same cold file: the bound for cold reads. */
function diskLimit(env: Env, command: string, rates: number[]): void {
  try {
    if (rates.length === 0) throw new Error('no dd measurement succeeded');
    const gbps = median(rates);
    env.suite.report.limits.push({
      name: 'disk-direct', what: 'cold file read with O_DIRECT by dd (the disk)', size: env.sweepSize,
      gbps, minGBps: Math.min(...rates), maxGBps: Math.max(...rates), path: command,
    });
    env.suite.log(`limit: disk, ${command}: ${formatGBps(gbps)} GB/s (median of ${rates.length})`);
  } catch (err) {
    env.suite.report.limits.push({ name: 'disk-direct', what: 'cold file read with O_DIRECT by dd (the disk)', path: command || 'dd iflag=direct', error: (err as Error).message });
    env.suite.log(`limit: disk (dd O_DIRECT) failed: ${(err as Error).message}`);
  }
  env.suite.writeJson();
}
