/**
 * `npm run bench:timeline`: where the time of one mid-size or small operation goes, from the
 * milestones the addon reports (binding.ts NativeOpTimeline) and the JS thread's own clock:
 *
 *   call     JS submit() call → the operation started (argument parsing, planning in native code)
 *   to pool  started → its first task began on a worker (queue hop, thread wake-up)
 *   work     first task began → last task finished (reads, copies, their waits)
 *   back     last task finished → result built on the main thread (drain, hand-back, wake-up)
 *   resume   result built → the awaiting JS code runs again (promise settlement)
 *
 * Then batches of 10 000 random 4 KiB ranges, with the batch's own milestones: the planning, the
 * wake-up of the pool (*ramp*) and how busy its threads were; and the same batches through the
 * public `readBatch`, range objects and all, in parts as planned and as one part.
 *
 * Sequential reads, each awaited, of warm files, through hand-made specs (as plan-knobs.ts),
 * for several task counts, with the pool spinning as planned; then the public `file.read` for
 * several `inlineReadMax` settings. Every column is a median in µs.
 *
 * Gathered reads (gather_read.cc) get rows of their own, for several task and copy sizes; reads
 * of kept pages (kept_pages.cc) too, their copy issued on the calling thread or on a worker,
 * interleaved read by read with staged `file.read` (keptPagesMax 0) and the public default.
 *
 *   npm run bench:timeline -- [--dir DIR] [--json OUT] [--only sizes,gather,gather-ab,kept-ab,ramp,inline,batch,file]
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { native, type NativeBatchResult, type NativeOpResult, type NativeOpSpec, type NativeStagedSpec } from '../src/addon/binding.js';
import { BATCH_PART_PIECES, BATCH_RING_ENTRIES, BATCH_RING_SCRATCH, columnsOf, planBatch, type PlanRange } from '../src/plan/batch-plan.js';
import { readBatchInParts } from '../src/engine/batch/batch-read.js';
import { createTestFile } from '../src/cli/bench/testfile.js';
import { median } from '../src/cli/bench/stats.js';
import { configure, DeviceBuffer, getConfig, hasGpu, open, type Settings } from '../src/index.js';
import { runtimeInfo } from '../src/doctor.js';
import { bounceBytes, ensurePool } from '../src/addon/runtime.js';
import { deviceReadTaskSize, DIRECT_PIECE, POOL_SPIN_NS, poolSpinners, stagePiece } from '../src/plan/transfer-plan.js';

const { values } = parseArgs({
  options: { dir: { type: 'string', default: os.tmpdir() }, json: { type: 'string' }, only: { type: 'string', default: 'sizes,gather,gather-ab,kept-ab,ramp,inline,batch,file' } },
});
const only = new Set(values.only!.split(','));
const KiB = 1024;
const MiB = KiB * KiB;
const s = getConfig();
const cores = os.availableParallelism();
const gpu = hasGpu();
if (!gpu) console.log(`no GPU: host rows only (${runtimeInfo().cuda.error ?? runtimeInfo().cuda.initError?.code})`);

const fileSize = 256 * MiB;
const file = path.join(values.dir!, `penstock-timeline-${process.pid}.bin`);
await createTestFile(file, fileSize);
const fd = fs.openSync(file, 'r');
fs.readFileSync(file); // warm
const dev = gpu ? DeviceBuffer.alloc(fileSize) : undefined;
const host = Buffer.alloc(fileSize);
ensurePool();
const half = gpu ? bounceBytes() / 2 : 0;

/**
 * `stageScratch`: staged reads through scratch pieces of that size, streamed into the bounce half;
 * `piece`: bytes per copy to the GPU (0: as planned, a whole half).
 */
function spec(target: 'device' | 'host', size: number, taskSize: number, stageScratch = 0, piece = 0, gatherCopy = 0): NativeOpSpec {
  const base = { write: false, fd, directFd: -1, fileOffset: 0, size, taskSize, maxRunners: 0, writePiece: 0 } as const;
  return target === 'device'
    ? { ...base, route: 'posix-device', devicePtr: dev!.ptr, device: dev!.device, stagePiece: piece || stagePiece(taskSize, half, false, false), mapped: false, mappedPiece: 0, mappedClaimDivisor: 0, stageScratch, gatherCopy }
    : { ...base, route: 'posix-host', host, hostOffset: 0, hostStagePiece: 0, directPiece: DIRECT_PIECE };
}

const STEPS = ['call', 'to pool', 'work', 'back', 'resume', 'total', 'io', 'copies'] as const;
type Step = (typeof STEPS)[number];

async function measure(sp: NativeOpSpec): Promise<Record<Step, number>> {
  const n = Math.max(30, Math.min(300, Math.round((128 * MiB) / sp.size)));
  const rows: Record<Step, number[]> = Object.fromEntries(STEPS.map((k) => [k, [] as number[]])) as never;
  for (let i = 0; i < n + 10; i++) {
    const t0 = Number(process.hrtime.bigint());
    const r: NativeOpResult = await native().submit(sp).promise;
    const t1 = Number(process.hrtime.bigint());
    if (i < 10) continue; // warm-up
    const t = r.timeline;
    rows.call.push(t.startNs - t0);
    rows['to pool'].push(t.firstTaskNs - t.startNs);
    rows.work.push(t.lastTaskEndNs - t.firstTaskNs);
    rows.back.push(t.settleNs - t.lastTaskEndNs);
    rows.resume.push(t1 - t.settleNs);
    rows.total.push(t1 - t0);
    rows.io.push(r.routeShare.ioNs);
    rows.copies.push((r.orderedCopies ?? 0) * 1000);
  }
  return Object.fromEntries(STEPS.map((k) => [k, median(rows[k]) / 1000])) as Record<Step, number>;
}

const out: Record<string, unknown>[] = [];
const planned: [number, number] = [POOL_SPIN_NS, poolSpinners(s.threads, cores)];
console.log(`${os.cpus()[0]?.model} × ${cores}, threads ${s.threads}${gpu ? `, bounce half ${half / MiB} MiB` : ''}; µs, medians`);
console.log(`${'spin'.padEnd(12)} ${'target'.padEnd(9)} ${'size'.padStart(8)} ${'tasks'.padStart(5)} ${STEPS.map((k) => k.padStart(8)).join(' ')}   GB/s`);
native().setThreads(s.threads, planned[0], planned[1]);
const label = `${planned[0] / 1000}µs×${planned[1]}`;
for (const size of only.has('sizes') ? [256 * KiB, 1 * MiB, 4 * MiB, 16 * MiB, 64 * MiB, 256 * MiB] : []) {
  // device/nt: through scratch; device/ntp: and a copy per scratch piece instead of per half;
  // device/p: a copy per MiB instead of per half.
  const variants = gpu
    ? ([['device', 0, 0], ['device', 0, MiB], ['device', 256 * KiB, 0], ['device', 256 * KiB, 256 * KiB], ['host', 0, 0]] as const)
    : ([['host', 0, 0]] as const);
  for (const [target, scratch, piece] of variants) {
    if (piece && scratch && (size < 4 * MiB || size > 64 * MiB)) continue;
    if (piece && !scratch && size < 64 * MiB) continue;
    for (const tasks of [1, 4, 16, 32, 64, 128]) {
      const taskSize = Math.max(16 * KiB, Math.ceil(size / tasks / (16 * KiB)) * 16 * KiB);
      if (Math.ceil(size / taskSize) !== tasks || (size >= 256 * MiB && tasks < 16) || (size < 256 * MiB && tasks > 64)) continue;
      if (tasks === 32 && (size < 16 * MiB || size > 64 * MiB)) continue;
      const m = await measure(spec(target, size, taskSize, scratch, piece));
      const gbps = size / (m.total * 1000);
      out.push({ spinNs: planned[0], spinners: planned[1], target, scratch, piece, size, tasks, ...m, gbps });
      const what = `${target}${scratch ? '/nt' : piece ? '/' : ''}${piece ? 'p' : ''}`;
      console.log(`${label.padEnd(12)} ${what.padEnd(9)} ${`${size / KiB}K`.padStart(8)} ${String(tasks).padStart(5)} ${STEPS.map((k) => m[k].toFixed(1).padStart(8)).join(' ')}   ${gbps.toFixed(2)}`);
    }
  }
}
// Gathered reads: tasks of several sizes into the one stage, copied in order once the finished
// prefix has grown by `copy` bytes (device/gCOPY).
for (const size of gpu && only.has('gather') ? [4 * MiB, 16 * MiB, 64 * MiB] : []) {
  // The way before: through the bounce halves, a task per thread (device/nt above).
  const before = await measure(spec('device', size, Math.ceil(size / s.threads / 4096) * 4096, 256 * KiB));
  console.log(`${label.padEnd(12)} ${'device/nt'.padEnd(9)} ${`${size / KiB}K`.padStart(8)} ${String(s.threads).padStart(5)} ${STEPS.map((k) => before[k].toFixed(1).padStart(8)).join(' ')}   ${(size / (before.total * 1000)).toFixed(2)}`);
  for (const taskSize of [128 * KiB, 256 * KiB]) {
    for (const copy of [512 * KiB, 1 * MiB, 2 * MiB]) {
      const m = await measure(spec('device', size, taskSize, Math.min(taskSize, 256 * KiB), 0, copy));
      const gbps = size / (m.total * 1000);
      const tasks = Math.ceil(size / taskSize);
      out.push({ spinNs: planned[0], spinners: planned[1], target: 'device', gather: copy, size, tasks, ...m, gbps });
      console.log(`${label.padEnd(12)} ${`device/g${copy / KiB}K`.padEnd(9)} ${`${size / KiB}K`.padStart(8)} ${String(tasks).padStart(5)} ${STEPS.map((k) => m[k].toFixed(1).padStart(8)).join(' ')}   ${gbps.toFixed(2)}`);
    }
  }
}
// Gathered or not, interleaved read by read so that drift between them cancels: the way before
// (through the bounce halves, a task per thread) against gathered variants (tasks, copy).
if (gpu && only.has('gather-ab')) {
  const ROUNDS = 150;
  for (const size of [4 * MiB, 16 * MiB, 64 * MiB]) {
    const variants: [string, NativeOpSpec][] = [['device/nt', spec('device', size, Math.ceil(size / s.threads / 4096) * 4096, 256 * KiB)]];
    for (const [task, copy] of [[256 * KiB, 1 * MiB], [256 * KiB, 2 * MiB], [512 * KiB, 2 * MiB]] as const) {
      variants.push([`device/g${task / KiB}K ${copy / KiB}K`, spec('device', size, task, 256 * KiB, 0, copy)]);
    }
    // Fewer threads reading leave the copies more of the memory's bandwidth.
    for (const runners of [4, 8, 12]) {
      variants.push([`device/g256K 1024K ≤${runners}`, { ...spec('device', size, 256 * KiB, 256 * KiB, 0, 1 * MiB), maxRunners: runners }]);
    }
    const times = variants.map(() => [] as number[]);
    for (let round = 0; round < ROUNDS + 10; round++) {
      for (let v = 0; v < variants.length; v++) {
        const t0 = Number(process.hrtime.bigint());
        await native().submit(variants[v]![1]).promise;
        if (round >= 10) times[v]!.push(Number(process.hrtime.bigint()) - t0);
      }
    }
    for (let v = 0; v < variants.length; v++) {
      const us = median(times[v]!) / 1000;
      out.push({ ab: variants[v]![0], size, total: us, gbps: size / (us * 1000) });
      console.log(`a/b ${variants[v]![0].padEnd(26)} ${`${size / KiB}K`.padStart(8)} ${us.toFixed(1).padStart(9)} µs ${(size / (us * 1000)).toFixed(2).padStart(7)} GB/s`);
    }
  }
}
// Reads of kept pages: the one copy issued on the calling thread (the default for a range kept
// already) or by the worker that takes the task, and the public default, interleaved read by
// read; then the same range staged. The steps of the first two are the addon's milestones.
if (gpu && only.has('kept-ab')) {
  const { KEPT_SETTLE_MS, KEPT_SETTLE_NS } = await import('../src/engine/kept-pages.js');
  await new Promise((r) => setTimeout(r, KEPT_SETTLE_MS + 100)); // registration refuses a file changed within it
  const ROUNDS = 150;
  await using f = await open(file);
  const initial = getConfig();
  let id = 900_000;
  for (const size of [4 * MiB, 16 * MiB, 64 * MiB]) {
    const kept = { id: ++id, fd, fileOffset: 0, size, taskSize: size, device: dev!.device, devicePtr: dev!.ptr, settleNs: KEPT_SETTLE_NS };
    await native().submitKept({ ...kept, keep: true, issue: false }).promise;
    const variants: [string, () => Promise<NativeOpResult | number>][] = [
      ['kept, issued', () => native().submitKept({ ...kept, keep: false, issue: true }).promise],
      ['kept, on a worker', () => native().submitKept({ ...kept, keep: false, issue: false }).promise],
      ['file.read default', () => f.read(dev!, { size })],
    ];
    const times = variants.map(() => [] as number[]);
    const steps = variants.map(() => Object.fromEntries(STEPS.map((k) => [k, [] as number[]])) as Record<Step, number[]>);
    for (let round = 0; round < ROUNDS + 10; round++) {
      for (let v = 0; v < variants.length; v++) {
        const t0 = Number(process.hrtime.bigint());
        const r = await variants[v]![1]();
        const t1 = Number(process.hrtime.bigint());
        if (round < 10) continue;
        times[v]!.push(t1 - t0);
        if (typeof r === 'number') continue;
        const t = r.timeline;
        const row = steps[v]!;
        row.call.push(t.startNs - t0);
        row['to pool'].push(t.firstTaskNs - t.startNs);
        row.work.push(t.lastTaskEndNs - t.firstTaskNs);
        row.back.push(t.settleNs - t.lastTaskEndNs);
        row.resume.push(t1 - t.settleNs);
      }
    }
    native().keptRelease(id);
    // Staged reads after the rest: a smaller keptPagesMax releases the default's kept range.
    configure({ ...initial, keptPagesMax: 0 });
    variants.push(['file.read staged', () => f.read(dev!, { size })]);
    times.push([]);
    steps.push(Object.fromEntries(STEPS.map((k) => [k, [] as number[]])) as Record<Step, number[]>);
    for (let round = 0; round < ROUNDS + 10; round++) {
      const t0 = Number(process.hrtime.bigint());
      await f.read(dev!, { size });
      if (round >= 10) times.at(-1)!.push(Number(process.hrtime.bigint()) - t0);
    }
    configure(initial);
    for (let v = 0; v < variants.length; v++) {
      const us = median(times[v]!) / 1000;
      const parts = steps[v]!.call.length ? (['call', 'to pool', 'work', 'back', 'resume'] as const).map((k) => `${k} ${(median(steps[v]![k]) / 1000).toFixed(1)}`).join(', ') : '';
      out.push({ kept: variants[v]![0], size, total: us, gbps: size / (us * 1000) });
      console.log(`kept a/b ${variants[v]![0].padEnd(20)} ${`${size / KiB}K`.padStart(8)} ${us.toFixed(1).padStart(9)} µs ${(size / (us * 1000)).toFixed(2).padStart(7)} GB/s  ${parts}`);
    }
  }
}
// A large read whose first tasks are small, so the first copies start after a short pread
// rather than a full task's: emulated by operations submitted together, the small-task head(s)
// first (their runners queue first), against the read as planned; interleaved read by read.
if (gpu && only.has('ramp')) {
  const ROUNDS = 40;
  const size = fileSize;
  const planned = deviceReadTaskSize(s, size);
  const one = (offset: number, bytes: number, task: number): NativeOpSpec => {
    const sp = spec('device', bytes, task) as NativeStagedSpec;
    return { ...sp, fileOffset: offset, devicePtr: dev!.ptr + BigInt(offset) };
  };
  // Each variant: [label, [bytes, task size] of each head in order]; the rest in planned tasks.
  const variants: [string, [number, number][]][] = [
    ['as planned', []],
    ['4M in 256K', [[4 * MiB, 256 * KiB]]],
    ['8M in 512K', [[8 * MiB, 512 * KiB]]],
    ['4M/256K, 8M/512K', [[4 * MiB, 256 * KiB], [8 * MiB, 512 * KiB]]],
    ['4M/256K, 8M/512K, 16M/1M', [[4 * MiB, 256 * KiB], [8 * MiB, 512 * KiB], [16 * MiB, 1 * MiB]]],
  ];
  const times = variants.map(() => [] as number[]);
  for (let round = 0; round < ROUNDS + 5; round++) {
    for (let v = 0; v < variants.length; v++) {
      const specs: NativeOpSpec[] = [];
      let at = 0;
      for (const [bytes, task] of variants[v]![1]) {
        specs.push(one(at, bytes, task));
        at += bytes;
      }
      specs.push(one(at, size - at, planned));
      const t0 = Number(process.hrtime.bigint());
      await Promise.all(specs.map((sp) => native().submit(sp).promise));
      if (round >= 5) times[v]!.push(Number(process.hrtime.bigint()) - t0);
    }
  }
  for (let v = 0; v < variants.length; v++) {
    const us = median(times[v]!) / 1000;
    out.push({ ramp: variants[v]![0], size, total: us, gbps: size / (us * 1000) });
    console.log(`ramp ${variants[v]![0].padEnd(28)} ${`${size / KiB}K`.padStart(8)} ${us.toFixed(1).padStart(9)} µs ${(size / (us * 1000)).toFixed(2).padStart(7)} GB/s`);
  }
}
// Cached reads on the calling thread into the GPU, straight through the addon, by the size of the
// pieces (each copied while the next is read) and by the pool workers asked to help read them;
// beside the same read into host memory (the pread alone). Variants take turns in blocks of
// reads, so that helpers still spinning from one read find the next, as in a loop of reads; the
// first reads of a block are not counted. With the pool's spinning as planned, then with every
// thread allowed to spin.
if (gpu && only.has('inline')) {
  const BLOCKS = 30, BLOCK = 12, SKIP = 2;
  const report = new Uint32Array(1);
  for (const spinners of [planned[1], s.threads]) {
    native().setThreads(s.threads, planned[0], spinners);
    for (const size of [256 * KiB, 1 * MiB]) {
      const variants: [string, () => number][] = [['host (pread only)', () => native().readCached(fd, host, 0, size, 0)]];
      for (const scratch of [false, true])
        for (const piece of [64 * KiB, 128 * KiB, 256 * KiB])
          for (const helpers of [0, 1, 3, 7, 15]) {
            const pieces = Math.ceil(size / piece);
            if (piece > size || (helpers > 0 && helpers >= pieces) || (helpers === 0 && piece < 256 * KiB && !scratch)) continue;
            variants.push([`device, ${piece / KiB}K${scratch ? ' nt' : ''}, ${helpers} helpers`, () => native().readCachedToDevice(fd, dev!.device, dev!.ptr, size, 0, piece, helpers, scratch, report)]);
          }
      const times = variants.map(() => [] as number[]);
      const helped = variants.map(() => [] as number[]);
      for (let b = 0; b < BLOCKS; b++)
        for (let v = 0; v < variants.length; v++)
          for (let i = 0; i < BLOCK; i++) {
            report[0] = 0;
            const t0 = Number(process.hrtime.bigint());
            const got = variants[v]![1]();
            const t1 = Number(process.hrtime.bigint());
            if (got !== size) throw new Error(`inline read of ${size} gave ${got}`);
            if (b > 0 && i >= SKIP) {
              times[v]!.push(t1 - t0);
              helped[v]!.push(report[0]!);
            }
          }
      for (let v = 0; v < variants.length; v++) {
        const us = median(times[v]!) / 1000;
        const h = helped[v]!.reduce((a, x) => a + x, 0) / helped[v]!.length;
        out.push({ inline: variants[v]![0], spinners, size, total: us, gbps: size / (us * 1000), helpedPieces: h });
        console.log(`inline ${`${spinners} spin`.padEnd(8)} ${variants[v]![0].padEnd(34)} ${`${size / KiB}K`.padStart(6)} ${us.toFixed(1).padStart(8)} µs ${(size / (us * 1000)).toFixed(2).padStart(6)} GB/s  helped ${h.toFixed(2)} pieces`);
      }
    }
  }
  native().setThreads(s.threads, planned[0], planned[1]);
}
// Batches of 10 000 random 4 KiB ranges, planned as readBatch plans them and submitted straight
// to the addon: *plan* is the JS planning, *ramp* the time from the first task until every
// runner queued at the start had begun one (waking the pool), *busy* the share of the work's
// wall time that the pool's threads spent inside tasks.
if (only.has('batch')) {
  const RANGES = 10_000;
  const pages = Math.floor(fileSize / 4096);
  console.log(`batches of ${RANGES} random 4 KiB ranges: µs, medians`);
  console.log(`${'target'.padEnd(12)} ${['plan', 'call', 'to pool', 'ramp', 'work', 'back', 'resume', 'total'].map((k) => k.padStart(8)).join(' ')}   busy   M ranges/s`);
  // As planned (reads through each worker's io_uring ring), and '/pread': a pread each.
  const kinds = [...(gpu ? (['device', 'device/pread'] as const) : []), 'host', 'host/pread'] as const;
  for (const kind of kinds) {
    const target = kind.startsWith('host') ? 'host' : 'device';
    const rows: Record<string, number[]> = { plan: [], call: [], 'to pool': [], ramp: [], work: [], back: [], resume: [], total: [], busy: [] };
    for (let round = 0; round < 25; round++) {
      const ranges: PlanRange[] = [];
      for (let i = 0; i < RANGES; i++) {
        ranges.push({ file: 0, fileOffset: Math.floor(Math.random() * pages) * 4096, size: 4096, target: 0, targetOffset: i * 4096, device: target === 'device' ? dev!.device : -1 });
      }
      const t0 = Number(process.hrtime.bigint());
      const plan = planBatch(columnsOf(ranges), { threads: s.threads, hostReadMax: s.taskSize, deviceReadMax: () => half, hostTargets: target === 'device' ? 0 : 1 });
      const t1 = Number(process.hrtime.bigint());
      const r: NativeBatchResult = await native().submitBatch({
        fds: Int32Array.of(fd), reads: plan.reads, pieces: plan.pieces, tasks: plan.tasks,
        hostTargets: target === 'device' ? [] : [host.buffer],
        deviceTargets: target === 'device' ? BigUint64Array.of(dev!.ptr) : new BigUint64Array(0),
        deviceLengths: target === 'device' ? Float64Array.of(dev!.byteLength) : new Float64Array(0),
        deviceOrdinals: target === 'device' ? Int32Array.of(dev!.device) : new Int32Array(0),
        pieceBytes: new Float64Array(plan.pieceRange.length),
        ...(kind.endsWith('/pread') ? {} : { ring: BATCH_RING_ENTRIES, ringScratch: BATCH_RING_SCRATCH }),
      }).promise;
      const t2 = Number(process.hrtime.bigint());
      if (round < 5) continue; // warm-up
      const t = r.timeline;
      rows.plan!.push(t1 - t0);
      rows.call!.push(t.startNs - t1);
      rows['to pool']!.push(t.firstTaskNs - t.startNs);
      rows.ramp!.push(t.lastRunnerStartNs - t.firstTaskNs);
      rows.work!.push(t.lastTaskEndNs - t.firstTaskNs);
      rows.back!.push(t.settleNs - t.lastTaskEndNs);
      rows.resume!.push(t2 - t.settleNs);
      rows.total!.push(t2 - t0);
      rows.busy!.push(r.busyNs / ((t.lastTaskEndNs - t.firstTaskNs) * s.threads));
    }
    const m = Object.fromEntries(Object.entries(rows).map(([k, v]) => [k, median(v)]));
    out.push({ batch: kind, ranges: RANGES, ...Object.fromEntries(Object.entries(m).map(([k, v]) => [k, k === 'busy' ? v : v / 1000])) });
    const cols = ['plan', 'call', 'to pool', 'ramp', 'work', 'back', 'resume', 'total'].map((k) => (m[k]! / 1000).toFixed(1).padStart(8)).join(' ');
    console.log(`${kind.padEnd(12)} ${cols}   ${(m.busy! * 100).toFixed(0).padStart(3)}%   ${(RANGES / (m.total! / 1e3)).toFixed(2)}`);
  }
  // The same batches through the public call, with the range objects a caller builds: what
  // validation, planning and the per-range result add to the addon's part above; as planned (in
  // parts, each planned while the pool reads the one before) and as one part.
  // The addon's submitBatch, watched: *first* is the JS side up to the first part's submission
  // (validation, sorting, the first part's plan), *last* up to the last part's, *settled* until
  // the last part settled, *after* the per-range result and the promise.
  await using f = await open(file);
  const addon = native();
  const submitBatch = addon.submitBatch;
  let tFirst = 0;
  let tLast = 0;
  let tSettled = 0;
  addon.submitBatch = (spec) => {
    tLast = Number(process.hrtime.bigint());
    if (!tFirst) tFirst = tLast;
    const h = submitBatch.call(addon, spec);
    return { ...h, promise: h.promise.then((r) => ((tSettled = Math.max(tSettled, Number(process.hrtime.bigint()))), r)) };
  };
  try {
    const cols = ['first', 'last', 'settled', 'after', 'total'];
    console.log(`${'readBatch'.padEnd(22)} ${cols.map((k) => k.padStart(8)).join(' ')}   M ranges/s`);
    for (const target of gpu ? (['device', 'host'] as const) : (['host'] as const)) {
      for (const partPieces of [BATCH_PART_PIECES, Infinity]) {
        const mem = target === 'device' ? dev! : host;
        const rows: Record<string, number[]> = Object.fromEntries(cols.map((k) => [k, []]));
        for (let round = 0; round < 25; round++) {
          const offsets = Array.from({ length: RANGES }, () => Math.floor(Math.random() * pages) * 4096);
          tFirst = tSettled = 0;
          const t0 = Number(process.hrtime.bigint());
          const r = await readBatchInParts(offsets.map((o, i) => ({ fileOffset: o, size: 4096, target: mem, targetOffset: i * 4096 })), { file: f }, partPieces);
          const t1 = Number(process.hrtime.bigint());
          if (r.totalBytes !== RANGES * 4096) throw new Error(`readBatch read ${r.totalBytes} bytes`);
          if (round < 5) continue;
          rows.first!.push(tFirst - t0);
          rows.last!.push(tLast - t0);
          rows.settled!.push(tSettled - t0);
          rows.after!.push(t1 - tSettled);
          rows.total!.push(t1 - t0);
        }
        const m = Object.fromEntries(Object.entries(rows).map(([k, v]) => [k, median(v) / 1000]));
        const label = `${target} ${partPieces === Infinity ? 'one part' : `parts ${partPieces}`}`;
        out.push({ api: 'readBatch', target, partPieces: String(partPieces), ranges: RANGES, ...m });
        console.log(`readBatch ${label.padEnd(12)} ${cols.map((k) => m[k]!.toFixed(1).padStart(8)).join(' ')}   ${(RANGES / m.total!).toFixed(2)}`);
      }
    }
  } finally {
    addon.submitBatch = submitBatch;
  }
}

// The public call, as planned (transfer-plan.ts), for the same sizes: what the TypeScript side
// adds, and what the inlineReadMax setting changes.
if (only.has('file')) {
  await using f = await open(file);
  const initial = getConfig();
  console.log('file.read, as planned: µs per read (median), GB/s');
  for (const size of [64 * KiB, 256 * KiB, 1 * MiB, 4 * MiB, 16 * MiB, 64 * MiB, 256 * MiB]) {
    // From 64 MiB, directIoRead 'auto' samples the range's residency first; 'false' shows its cost.
    const configs: Partial<Settings>[] = size <= 4 * MiB ? [{}, { inlineReadMax: 64 * KiB }, { inlineReadMax: 4 * MiB }] : size >= 64 * MiB ? [{}, { directIoRead: false }] : [{}];
    for (const target of gpu ? (['device', 'host'] as const) : (['host'] as const)) {
      for (const c of configs) {
        configure({ ...initial, ...c });
        const mem = target === 'device' ? dev! : host;
        const n = Math.max(10, Math.min(300, Math.round((128 * MiB) / size)));
        const times: number[] = [];
        for (let i = 0; i < n + 5; i++) {
          const t0 = Number(process.hrtime.bigint());
          await f.read(mem, { size });
          if (i >= 5) times.push(Number(process.hrtime.bigint()) - t0);
        }
        const us = median(times) / 1000;
        const what = Object.entries(c).map(([k, v]) => `${k}=${v}`).join(' ') || 'defaults';
        out.push({ api: 'file.read', target, size, settings: c, total: us, gbps: size / (us * 1000) });
        console.log(`file.read    ${target.padEnd(6)} ${`${size / KiB}K`.padStart(8)} ${us.toFixed(1).padStart(9)} µs ${(size / (us * 1000)).toFixed(2).padStart(7)} GB/s  ${what}`);
      }
    }
  }
  configure(initial);
}
dev?.free();
fs.closeSync(fd);
fs.rmSync(file, { force: true });
if (values.json) fs.writeFileSync(values.json, JSON.stringify({ cores, threads: s.threads, half, rows: out }, null, 2));
