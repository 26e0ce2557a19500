/**
 * `npm run bench:multi-gpu`: aggregate throughput of warm 1 GiB files read into 1, 2, … all GPUs
 * at once (one file per GPU, through loadShards), with the route of every shard.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { DeviceBuffer, PinnedBuffer, deviceCount, getConfig, hasGpu } from '../src/index.js';
import { loadShards } from '../src/batch.js';
import { runtimeInfo } from '../src/doctor.js';
import { parseSize } from '../src/measure.js';

const { values } = parseArgs({
  options: {
    size: { type: 'string', default: '1GiB' },
    repeat: { type: 'string', default: '5' },
    dir: { type: 'string', default: os.tmpdir() },
    json: { type: 'string' },
  },
});
const size = parseSize(values.size!);
const repeat = Number(values.repeat);
if (!hasGpu()) {
  console.log(`no GPU: nothing to measure (${runtimeInfo().cuda.error ?? runtimeInfo().cuda.initError?.code})`);
  process.exit(0);
}
const gpus = deviceCount();
const files = Array.from({ length: gpus }, (_, i) => path.join(values.dir!, `penstock-multi-${process.pid}-${i}.bin`));
for (const f of files) {
  const fd = fs.openSync(f, 'w');
  for (let off = 0; off < size; off += 8 << 20) fs.writeSync(fd, crypto.randomBytes(Math.min(8 << 20, size - off)), 0, Math.min(8 << 20, size - off), off);
  fs.closeSync(fd);
}
const targets = files.map((_, i) => DeviceBuffer.alloc(size, { device: i }));
// The copy limit: one pinned → GPU copy per GPU, alone and all at once.
const pinned = PinnedBuffer.alloc(size);
const copyRates: { gpus: number; GBs: number }[] = [];
for (const n of [1, gpus]) {
  await Promise.all(targets.slice(0, n).map((t) => t.copyFrom(pinned)));
  const t0 = performance.now();
  await Promise.all(targets.slice(0, n).map((t) => t.copyFrom(pinned)));
  copyRates.push({ gpus: n, GBs: (n * size) / 1e9 / ((performance.now() - t0) / 1000) });
  console.log(`limit: pinned → GPU copy, ${n} GPU(s) at once: ${copyRates.at(-1)!.GBs.toFixed(1)} GB/s aggregate`);
}
pinned.free();
const rows: { gpus: number; medianGBs: number; minGBs: number; maxGBs: number; routes: string[] }[] = [];
try {
  for (let n = 1; n <= gpus; n++) {
    const shards = files.slice(0, n).map((f, i) => ({ path: f, target: targets[i]! }));
    await loadShards(shards); // warm the page cache and the routes
    const times: number[] = [];
    let routes: string[] = [];
    for (let r = 0; r < repeat; r++) {
      const t0 = performance.now();
      const res = await loadShards(shards);
      times.push((performance.now() - t0) / 1000);
      const failed = res.find((x) => x.error);
      if (failed) throw failed.error;
      routes = res.map((x) => `GPU ${x.device}: ${x.carried?.route} ×${x.carried?.tasks}`);
    }
    times.sort((a, b) => a - b);
    const gb = (n * size) / 1e9;
    const row = { gpus: n, medianGBs: gb / times[times.length >> 1]!, minGBs: gb / times[times.length - 1]!, maxGBs: gb / times[0]!, routes };
    rows.push(row);
    console.log(`${n} GPU(s): ${row.medianGBs.toFixed(1)} GB/s aggregate (min ${row.minGBs.toFixed(1)}, max ${row.maxGBs.toFixed(1)}) — ${routes.join('; ')}`);
  }
} finally {
  targets.forEach((t) => t.free());
  files.forEach((f) => fs.rmSync(f, { force: true }));
}
const report = { size, repeat, threads: getConfig().threads, cores: os.availableParallelism(), copyRates, rows };
if (values.json) fs.writeFileSync(values.json, JSON.stringify(report, null, 2));
