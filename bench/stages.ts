/**
 * `npm run bench:stages`: where the time of penstock's own tasks goes, for the two questions the
 * suite's totals cannot answer.
 *
 * - Writes: GPU → file against host → file at several `writeThreads`, the two targets
 *   alternating repeat by repeat (so drift of the machine hits both alike).
 * - Warm reads into the GPU with and without the mapped route, alternating likewise.
 *
 * Every row gives GB/s (median, min, max), CPU seconds per GB, and the tasks' thread time per GB
 * split into system calls, waits for GPU copies and the rest, per route.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { DeviceBuffer, configure, getConfig, hasGpu, open, type Settings } from '../src/index.js';
import { runtimeInfo } from '../src/doctor.js';
import { ROUTES, parseSize, stats, type StatsSnapshot } from '../src/measure.js';
import { routeDelta } from '../src/cli/bench/measure.js';
import { median } from '../src/cli/bench/stats.js';

const { values } = parseArgs({
  options: {
    dir: { type: 'string', default: os.tmpdir() },
    size: { type: 'string', default: '1GiB' },
    'read-sizes': { type: 'string', default: '1GiB' },
    'write-threads': { type: 'string', default: '1,4,16' },
    'read-threads': { type: 'string', default: '1,2,4,16' },
    repeat: { type: 'string', default: '5' },
    only: { type: 'string', default: 'writes,reads' },
    json: { type: 'string' },
  },
});
const repeat = Number(values.repeat);
const only = new Set(values.only!.split(','));
if (!hasGpu()) {
  console.log(`no GPU: nothing to measure (${runtimeInfo().cuda.error ?? runtimeInfo().cuda.initError?.code})`);
  process.exit(0);
}
const initial = getConfig();
const out: Record<string, unknown>[] = [];

interface Sample {
  seconds: number;
  cpu: number;
  before: StatsSnapshot;
  after: StatsSnapshot;
}

function cpuNow(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
}

async function sample(run: () => Promise<unknown>): Promise<Sample> {
  const before = stats();
  const c0 = cpuNow();
  const t0 = performance.now();
  await run();
  const seconds = (performance.now() - t0) / 1000;
  return { seconds, cpu: cpuNow() - c0, before, after: stats() };
}

/** One row: throughput over the samples, and per route the thread time per GB by stage. */
function report(label: string, bytes: number, samples: Sample[], extra: Record<string, unknown> = {}): void {
  const gbps = samples.map((s) => bytes / 1e9 / s.seconds);
  const gb = (bytes * samples.length) / 1e9;
  const routes: Record<string, unknown> = {};
  const parts: string[] = [];
  for (const r of ROUTES) {
    // Samples of one variant are interleaved with others', so each is its own delta.
    let ops = 0, by = 0, busy = 0, io = 0, wait = 0;
    for (const d of samples.map((s) => routeDelta(s.before, s.after)[r])) {
      if (!d) continue;
      ops += d.ops;
      by += d.bytes;
      busy += d.busySeconds;
      io += d.ioSeconds;
      wait += d.waitSeconds;
    }
    if (!ops) continue;
    routes[r] = { ops, share: by / (bytes * samples.length), busyPerGB: busy / gb, ioPerGB: io / gb, waitPerGB: wait / gb };
    parts.push(`${r} ${((100 * by) / (bytes * samples.length)).toFixed(0)}%: thread s/GB ${(busy / gb).toFixed(3)} = io ${(io / gb).toFixed(3)} + wait ${(wait / gb).toFixed(3)} + other ${((busy - io - wait) / gb).toFixed(3)}`);
  }
  const cpu = samples.reduce((a, s) => a + s.cpu, 0) / gb;
  console.log(`${label.padEnd(34)} ${median(gbps).toFixed(2).padStart(6)} GB/s (${Math.min(...gbps).toFixed(2)}–${Math.max(...gbps).toFixed(2)})  CPU ${cpu.toFixed(2)} s/GB  ${parts.join('; ')}`);
  out.push({ label, bytes, medianGBps: median(gbps), minGBps: Math.min(...gbps), maxGBps: Math.max(...gbps), cpuSecondsPerGB: cpu, routes, ...extra });
}

function makeFile(file: string, size: number): void {
  const fd = fs.openSync(file, 'w');
  const block = crypto.randomBytes(8 << 20);
  for (let off = 0; off < size; off += block.length) {
    block.writeUInt32LE(off / block.length, 0); // no two blocks alike
    fs.writeSync(fd, block, 0, Math.min(block.length, size - off), off);
  }
  fs.fsyncSync(fd);
  fs.closeSync(fd);
}

interface Variant {
  label: string;
  settings: Partial<Settings>;
}

/** Runs every variant once per round, in alternating order; the first round only warms up. */
async function rounds(variants: Variant[], run: (v: Variant) => Promise<Sample | undefined>): Promise<Map<string, Sample[]>> {
  const got = new Map<string, Sample[]>(variants.map((v) => [v.label, []]));
  for (let r = -1; r < repeat; r++) {
    for (const v of r % 2 ? variants : [...variants].reverse()) {
      configure({ ...initial, ...v.settings });
      const s = await run(v);
      if (r >= 0 && s) got.get(v.label)!.push(s);
    }
  }
  configure(initial);
  return got;
}

async function writes(): Promise<void> {
  const size = parseSize(values.size!);
  const file = path.join(values.dir!, `penstock-stages-w-${process.pid}.bin`);
  using dev = DeviceBuffer.alloc(size);
  const host = Buffer.alloc(size, 7);
  await dev.copyFrom(host);
  console.log(`writes of ${values.size} into a new file each repeat (fsync after, untimed), variants alternating`);
  for (const wt of values['write-threads']!.split(',').map(Number)) {
    const variants: Variant[] = [
      { label: `GPU → file, writeThreads ${wt}`, settings: { writeThreads: wt } },
      { label: `host → file, writeThreads ${wt}`, settings: { writeThreads: wt } },
      { label: `host → file, writeThreads ${wt}, hostStaging off`, settings: { writeThreads: wt, hostStaging: false } },
    ];
    const got = await rounds(variants, async (v) => {
      fs.rmSync(file, { force: true });
      const f = await open(file, 'w', { compatMode: 'on' });
      const s = await sample(() => f.write(v.label.startsWith('GPU') ? dev : host));
      fs.fsyncSync(f.fd);
      await f.close();
      return s;
    });
    for (const v of variants) report(`write ${v.label}`, size, got.get(v.label)!, { op: 'write', ...v.settings });
    const med = (l: string) => median(got.get(l)!.map((x) => size / x.seconds));
    console.log(`  GPU / host: ${(med(variants[0]!.label) / med(variants[1]!.label)).toFixed(3)}`);
  }
  fs.rmSync(file, { force: true });
}

async function reads(): Promise<void> {
  for (const size of values['read-sizes']!.split(',').map(parseSize)) {
    const file = path.join(values.dir!, `penstock-stages-r-${process.pid}.bin`);
    makeFile(file, size);
    using dev = DeviceBuffer.alloc(size);
    const f = await open(file, 'r', { compatMode: 'on' });
    configure({ ...initial, mappedReads: false });
    await f.read(dev); // into the page cache
    for (const threads of values['read-threads']!.split(',').map(Number)) {
      console.log(`warm reads of ${size / 2 ** 30} GiB into the GPU at ${threads} threads, staged only and with the mapped route, alternating`);
      const variants: Variant[] = [
        { label: `staged only, ${threads} threads`, settings: { threads, mappedReads: false } },
        { label: `with the mapped route, ${threads} threads`, settings: { threads, mappedReads: true } },
      ];
      const got = await rounds(variants, (v) => sample(() => f.read(dev)));
      for (const v of variants) report(`read → GPU ${size / 2 ** 30} GiB, ${v.label}`, size, got.get(v.label)!, { op: 'read', ...v.settings });
    }
    if (f.route.mapped) console.log(`  mapped route refused: ${f.route.mapped.message}`);
    await f.close();
    fs.rmSync(file, { force: true });
  }
}

if (only.has('writes')) await writes();
if (only.has('reads')) await reads();
if (values.json) fs.writeFileSync(values.json, JSON.stringify({ machine: { cpus: os.cpus().length, kernel: os.release() }, settings: initial, rows: out }, null, 2));
