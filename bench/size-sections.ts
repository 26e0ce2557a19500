/**
 * The suite's sections for every size: `Promise.all` of single penstock reads as a baseline
 * beside one large read, the task-size sweep at mid sizes that the task floor is chosen from,
 * and random 4 KiB reads from a warm large file, batched 10 000 at a time.
 */
import fs from 'node:fs';
import { formatGBps, formatSize } from '../src/cli/kit/format.js';
import { measure } from '../src/cli/bench/measure.js';
import { configure, DeviceBuffer, open } from '../src/index.js';
import { readBatch, type BatchRange } from '../src/batch.js';
import type { Row, Target } from './context.js';
import { penstockRead, type Method } from './methods.js';
import { measureRow, type Env } from './sections.js';

const KiB = 1024;
const MiB = KiB * KiB;
const GiB = MiB * KiB;
/** Concurrent single reads of the Promise.all baseline. */
const PIECES = 16;
/** Ranges per batch, and their size, in the batched section. */
export const BATCH_RANGES = 10_000;
const BATCH_BLOCK = 4 * KiB;

/** One size read as 16 concurrent single penstock reads (`Promise.all`): what a caller could do by hand. */
export function penstockPromiseAll(target: Target): Method {
  return {
    id: `penstock-${target}-promise-all`,
    name: `Promise.all of ${PIECES} penstock reads`,
    target,
    op: 'read',
    baseline: `${PIECES} concurrent file.read calls of a 16th each, in one Promise.all`,
    async make({ file, size, buffers }) {
      const mem = target === 'device' ? buffers.device() : buffers.host();
      const f = await open(file, 'r');
      const piece = Math.max(4 * KiB, Math.ceil(size / PIECES / 4096) * 4096);
      const offsets: number[] = [];
      for (let at = 0; at < size; at += piece) offsets.push(at);
      return {
        run: async () => {
          const got = await Promise.all(offsets.map((at) => f.read(mem, { fileOffset: at, targetOffset: at, size: Math.min(piece, size - at) })));
          return got.reduce((a, b) => a + b, 0);
        },
        close: () => f.close(),
      };
    },
  };
}

/** Task sizes at mid sizes, where the floor on task size is decided (transfer-plan.ts). */
export async function splitSweep(env: Env): Promise<void> {
  const sizes = env.sizes.filter((s) => s >= MiB && s <= 256 * MiB);
  const tasks = env.suite.opts.quick ? [64 * KiB, 256 * KiB, MiB, 4 * MiB] : [64 * KiB, 128 * KiB, 256 * KiB, 512 * KiB, MiB, 2 * MiB, 4 * MiB];
  env.suite.log(`task size at mid sizes (${sizes.map(formatSize).join(', ')}), ${env.defaults.threads} threads, warm: tasks of min(taskSize, max(floor, size/threads))`);
  if (!env.gpu) env.suite.skip('task size at mid sizes into the GPU', 'no GPU');
  for (const size of sizes)
    for (const t of tasks) {
      if (env.gpu) await measureRow(env, 'split', penstockRead('device'), size, { taskSize: t });
      await measureRow(env, 'split', penstockRead('host'), size, { taskSize: t });
    }
}

/** A fixed pseudo-random set of block-aligned offsets. */
function randomOffsets(fileSize: number, n: number, seed: number): number[] {
  const blocks = Math.floor(fileSize / BATCH_BLOCK);
  let x = seed >>> 0;
  return Array.from({ length: n }, () => {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    return ((x * 65536 + ((x >>> 7) & 0xffff)) % blocks) * BATCH_BLOCK;
  });
}

/**
 * Slot i of the target for range i, shuffled (a fixed permutation): ranges next to each other
 * in the file then land apart in memory, as rows gathered into a batch of embeddings do. The
 * scattered row puts range i at twice its slot, so no two ranges are next to each other in
 * the target and none can share a copy.
 */
function scatteredSlots(n: number): number[] {
  const slots = Array.from({ length: n }, (_, i) => i);
  let x = 7;
  for (let i = n - 1; i > 0; i--) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    const j = x % (i + 1);
    [slots[i], slots[j]] = [slots[j]!, slots[i]!];
  }
  return slots;
}

/**
 * Random 4 KiB reads from a warm file of up to 4 GiB, 10 000 per batch: one readBatch call,
 * against `Promise.all` of 10 000 single penstock reads (and, into host memory, of 10 000
 * FileHandle.read calls). Rows carry ranges per second beside GB/s. A second readBatch row puts
 * the ranges at every other slot of a target twice as large, shuffled, so that no two land
 * next to each other (into a GPU: a copy per range).
 */
export async function batchedReads(env: Env): Promise<void> {
  const size = [...env.files.keys()].filter((s) => s <= 4 * GiB).sort((a, b) => b - a)[0];
  if (size === undefined || size < 64 * MiB) return env.suite.skip('batched random reads', 'no test file of 64 MiB or more');
  const file = env.files.get(size)!;
  configure({ threads: env.defaults.threads, taskSize: env.defaults.taskSize });
  env.suite.log(`batched random reads: ${BATCH_RANGES} × ${formatSize(BATCH_BLOCK)} per batch from a warm ${formatSize(size)} file`);
  const warm = await open(file);
  try {
    for (let at = 0; at < size; at += env.buffers.maxSize) await warm.read(env.buffers.host(), { fileOffset: at, size: Math.min(env.buffers.maxSize, size - at) });
  } finally {
    await warm.close();
  }
  if (!env.gpu) env.suite.skip('batched random reads into the GPU', 'no GPU');
  const targets: Target[] = env.gpu ? ['device', 'host'] : ['host'];
  for (const target of targets) {
    const bytes = BATCH_RANGES * BATCH_BLOCK;
    const dev = target === 'device' ? DeviceBuffer.alloc(2 * bytes) : undefined;
    const mem = dev ?? Buffer.alloc(2 * bytes);
    try {
      const f = await open(file);
      const fh = await fs.promises.open(file, 'r');
      let seed = 1;
      let offsets = randomOffsets(size, BATCH_RANGES, seed);
      const fresh = () => void (offsets = randomOffsets(size, BATCH_RANGES, ++seed));
      const slots = scatteredSlots(BATCH_RANGES);
      const batchWay = (id: string, name: string, slot: (i: number) => number) => {
        const way = {
          id, name, path: '',
          run: async () => {
            const ranges: BatchRange[] = offsets.map((o, i) => ({ fileOffset: o, size: BATCH_BLOCK, target: mem, targetOffset: slot(i) * BATCH_BLOCK }));
            const r = await readBatch(ranges, { file: f });
            if (r.errors.size) throw r.errors.values().next().value as Error;
            way.path = JSON.stringify(r.record.routes);
            return r.totalBytes;
          },
        };
        return way;
      };
      const ways: { id: string; name: string; path: string; run: () => Promise<number> }[] = [
        batchWay('penstock-batch', 'penstock readBatch', (i) => i),
        batchWay('penstock-batch-scattered', 'penstock readBatch, scattered targets', (i) => 2 * slots[i]!),
        {
          id: 'penstock-promise-all-single', name: `Promise.all of ${BATCH_RANGES} penstock reads`, path: `${BATCH_RANGES} concurrent file.read calls`,
          run: async () => (await Promise.all(offsets.map((o, i) => f.read(mem, { fileOffset: o, size: BATCH_BLOCK, targetOffset: i * BATCH_BLOCK })))).reduce((a, b) => a + b, 0),
        },
      ];
      if (target === 'host')
        ways.push({
          id: 'filehandle-promise-all', name: `Promise.all of ${BATCH_RANGES} FileHandle.read`, path: `${BATCH_RANGES} concurrent FileHandle.read calls on libuv's pool`,
          run: async () => (await Promise.all(offsets.map((o, i) => fh.read(mem as Buffer, i * BATCH_BLOCK, BATCH_BLOCK, o)))).reduce((a, b) => a + b.bytesRead, 0),
        });
      try {
        for (const w of ways) {
          const row: Row = { section: 'batch', methodId: w.id, method: w.name, target, op: 'read', state: 'warm', size: bytes, path: w.path };
          try {
            // Every repeat reads a fresh set of offsets (chosen untimed), so no way reads what the one before left in the CPU caches.
            const m = await measure({ repeats: Math.max(3, env.suite.opts.repeat), iterations: 4, prepare: fresh, run: w.run });
            Object.assign(row, {
              medianGBps: m.medianGBps, minGBps: m.minGBps, maxGBps: m.maxGBps, cpuSecondsPerGB: m.cpuSecondsPerGB, medianSeconds: m.medianSeconds,
              repeats: m.repeats, iterations: m.iterations, samples: m.samples, routes: m.routes, rangesPerSecond: (m.medianGBps * 1e9) / BATCH_BLOCK,
              path: w.path || row.path,
            });
            env.suite.log(`batch ${target} ${w.name}: ${((m.medianGBps * 1e9) / BATCH_BLOCK / 1e6).toFixed(3)} M ranges/s, ${formatGBps(m.medianGBps)} GB/s`);
          } catch (err) {
            row.error = (err as Error).message;
          }
          env.suite.add(row);
        }
      } finally {
        await f.close();
        await fh.close();
      }
    } finally {
      dev?.free();
    }
  }
}
