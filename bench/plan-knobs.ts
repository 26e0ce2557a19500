/**
 * `npm run bench:knobs`: the native knobs that transfer-plan.ts sets, measured around their
 * planned values on warm files, so the constants there come from numbers. Operations go straight
 * to the addon with hand-made specs (everything else as file.ts plans it), so one run compares:
 *
 * - pool spinning: idle threads watching the queue (spinNs, spinners) against sleeping at once,
 *   for sequential device and host reads of mid sizes and for 4 KiB reads through the pool;
 * - staged read pieces: the planned piece (a whole bounce half) against a quarter of a task.
 *
 * Every row is GB/s (median of the repeats; sequential reads, each awaited) or µs per read.
 *
 *   npm run bench:knobs -- [--dir DIR] [--repeat 5] [--json OUT]
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { native, type NativeOpSpec } from '../src/addon/binding.js';
import { createTestFile } from '../src/cli/bench/testfile.js';
import { median } from '../src/cli/bench/stats.js';
import { DeviceBuffer, getConfig, hasGpu } from '../src/index.js';
import { runtimeInfo } from '../src/doctor.js';
import { bounceBytes, ensurePool } from '../src/addon/runtime.js';
import { DIRECT_PIECE, hostStagePiece, POOL_SPIN_NS, poolSpinners, stagePiece, taskSizeFor } from '../src/plan/transfer-plan.js';

const { values } = parseArgs({
  options: {
    dir: { type: 'string', default: os.tmpdir() },
    repeat: { type: 'string', default: '5' },
    json: { type: 'string' },
  },
});
if (!hasGpu()) {
  console.log(`no GPU: nothing to measure (${runtimeInfo().cuda.error ?? runtimeInfo().cuda.initError?.code})`);
  process.exit(0);
}
const repeat = Number(values.repeat);
const KiB = 1024;
const MiB = KiB * KiB;
const s = getConfig();
const cores = os.availableParallelism();
const rows: Record<string, unknown>[] = [];

const fileSize = 1024 * MiB;
const file = path.join(values.dir!, `penstock-knobs-${process.pid}.bin`);
await createTestFile(file, fileSize);
const fd = fs.openSync(file, 'r');
fs.readFileSync(file); // warm
using dev = DeviceBuffer.alloc(fileSize);
const host = Buffer.allocUnsafe(fileSize);
ensurePool();

function deviceSpec(size: number, piece: number): NativeOpSpec {
  const taskSize = taskSizeFor(s, size);
  return {
    route: 'posix-device', write: false, fd, directFd: -1, fileOffset: 0, size, taskSize, maxRunners: 0, writePiece: 0,
    devicePtr: dev.ptr, device: dev.device, stagePiece: piece, mapped: false, mappedPiece: 0, mappedClaimDivisor: 0, stageScratch: 0,
  };
}
function hostSpec(size: number): NativeOpSpec {
  return {
    route: 'posix-host', write: false, fd, directFd: -1, fileOffset: 0, size, taskSize: taskSizeFor(s, size), maxRunners: 0,
    writePiece: 0, host, hostOffset: 0, hostStagePiece: hostStagePiece(s, size), directPiece: DIRECT_PIECE,
  };
}

/** GB/s of `n` sequential operations, median over the repeats (one untimed round first). */
async function rate(spec: NativeOpSpec): Promise<{ gbps: number; usPerOp: number }> {
  const n = Math.max(4, Math.min(256, Math.round((256 * MiB) / spec.size)));
  const once = async () => {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < n; i++) await native().submit(spec).promise;
    return Number(process.hrtime.bigint() - t0) / 1e9;
  };
  await once();
  const times: number[] = [];
  for (let r = 0; r < repeat; r++) times.push(await once());
  const t = median(times);
  return { gbps: (spec.size * n) / t / 1e9, usPerOp: (t / n) * 1e6 };
}

function spin(ns: number, spinners: number): void {
  native().setThreads(s.threads, ns, spinners);
}

const half = bounceBytes() / 2;
const planned = { ns: POOL_SPIN_NS, spinners: poolSpinners(s.threads, cores) };
console.log(`${os.cpus()[0]?.model} × ${cores}, threads ${s.threads}, bounce half ${half / MiB} MiB; planned spin ${planned.ns / 1000} µs × ${planned.spinners}`);

const spins: [number, number][] = [[0, 0], [planned.ns, planned.spinners], [50_000, s.threads], [200_000, s.threads], [200_000, planned.spinners]];
for (const [ns, spinners] of spins) {
  spin(ns, spinners);
  for (const size of [4 * KiB, 256 * KiB, 1 * MiB, 16 * MiB]) {
    for (const target of ['device', 'host'] as const) {
      const spec = target === 'device' ? deviceSpec(size, stagePiece(taskSizeFor(s, size), half, false, false)) : hostSpec(size);
      const r = await rate(spec);
      const row = { knob: 'spin', spinNs: ns, spinners, target, size, ...r };
      rows.push(row);
      console.log(`spin ${String(ns / 1000).padStart(3)} µs × ${String(spinners).padStart(2)} | ${target.padEnd(6)} ${String(size / KiB).padStart(6)} KiB: ${r.gbps.toFixed(2).padStart(6)} GB/s, ${r.usPerOp.toFixed(1)} µs/op`);
    }
  }
}
spin(planned.ns, planned.spinners);

for (const size of [1 * MiB, 16 * MiB, 256 * MiB, 1024 * MiB]) {
  const task = taskSizeFor(s, size);
  const quarter = Math.max(64 * KiB, Math.ceil(task / 4 / 4096) * 4096);
  for (const [name, piece] of [['planned', stagePiece(task, half, false, false)], ['quarter', Math.min(quarter, half)]] as const) {
    const r = await rate(deviceSpec(size, piece));
    rows.push({ knob: 'stagePiece', variant: name, piece, size, ...r });
    console.log(`pieces ${name.padEnd(10)} (${String(piece / KiB).padStart(5)} KiB, tasks ${task / KiB} KiB) | device ${String(size / MiB).padStart(5)} MiB: ${r.gbps.toFixed(2).padStart(6)} GB/s`);
  }
}

fs.closeSync(fd);
fs.rmSync(file, { force: true });
if (values.json) fs.writeFileSync(values.json, JSON.stringify({ cores, threads: s.threads, half, rows }, null, 2));
