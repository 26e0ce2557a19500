/**
 * What a tensor costs a load beyond its bytes: the same bytes as many small tensors (MoE-shaped)
 * and as a few large ones, each loaded several times in one process and once per fresh process,
 * into host memory and into GPU 0 (a real GPU, or the fake driver with PENSTOCK_CUDA_LIBRARY).
 *
 *   node dist/bench/tensor-count.js [--dir /tmp] [--tensors 15000] [--size 65536] [--repeat 5]
 *     [--fresh 3] [--only host|device] [--keep]
 *
 * Prints, per file and target, the median ms per load and the µs per tensor beyond the large-tensor
 * file's time. `--load FILE --target host|device --repeat N` is the child a fresh row runs (and a
 * script to profile with `node --cpu-prof`).
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { writeSafetensorsFile, type TensorShape } from './tensor-checkpoints.js';

const { values: o } = parseArgs({
  options: {
    dir: { type: 'string', default: '/tmp' },
    tensors: { type: 'string', default: '15000' },
    size: { type: 'string', default: String(64 * 1024) },
    repeat: { type: 'string', default: '5' },
    fresh: { type: 'string', default: '3' },
    only: { type: 'string' },
    keep: { type: 'boolean', default: false },
    load: { type: 'string' },
    target: { type: 'string', default: 'host' },
  },
});

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
/** Median and least wall time and least CPU time of some loads: on a shared machine the least is the steadier figure. */
const summary = (ts: Timing[]) => ({ median: median(ts.map((t) => t.wall)), min: Math.min(...ts.map((t) => t.wall)), cpu: Math.min(...ts.map((t) => t.cpu)) });
type Summary = ReturnType<typeof summary>;

/** One load's wall time and the process's CPU time over it (all threads), in ms. */
interface Timing {
  wall: number;
  cpu: number;
}

async function loadLoop(file: string, target: string, repeat: number): Promise<Timing[]> {
  const t0 = performance.now();
  const p = await import('../src/index.js');
  const imported = performance.now() - t0;
  const times: Timing[] = [];
  for (let i = 0; i < repeat; i++) {
    const c = process.cpuUsage();
    const a = performance.now();
    const set = await p.loadTensors(file, target === 'device' ? { device: 0 } : { host: true });
    const wall = performance.now() - a;
    const used = process.cpuUsage(c);
    times.push({ wall, cpu: (used.user + used.system) / 1e3 });
    set.free();
  }
  process.stdout.write(JSON.stringify({ importMs: imported, loads: times }) + '\n');
  return times;
}

if (o.load) {
  await loadLoop(o.load, o.target, Number(o.repeat));
  process.exit(0);
}

const count = Number(o.tensors);
const size = Number(o.size);
const bytes = count * size;
const small: TensorShape[] = Array.from({ length: count }, (_, i) => ({ name: `model.layers.${Math.floor(i / 384)}.mlp.experts.${Math.floor(i / 3) % 128}.${['gate', 'up', 'down'][i % 3]}_proj.weight`, dtype: 'BF16', shape: [size / 2048, 1024] }));
const largeCount = Math.max(1, Math.round(bytes / (64 << 20)));
const large: TensorShape[] = Array.from({ length: largeCount }, (_, i) => ({ name: `model.layers.${i}.weight`, dtype: 'BF16', shape: [bytes / largeCount / 2048, 1024] }));
const files = { small: path.join(o.dir, `penstock-count-${count}x${size}.safetensors`), large: path.join(o.dir, `penstock-count-${largeCount}x${bytes / largeCount}.safetensors`) };
for (const [k, f] of Object.entries(files)) if (!fs.existsSync(f)) writeSafetensorsFile(f, k === 'small' ? small : large);

const self = fileURLToPath(import.meta.url);
const targets = o.only ? [o.only] : ['host', 'device'];
console.log(`${count} × ${size} B vs ${largeCount} × ${bytes / largeCount} B (${(bytes / 1e9).toFixed(2)} GB); repeat ${o.repeat}, fresh ${o.fresh}`);
for (const target of targets) {
  const rows: Record<string, { warm: Summary; fresh: Summary }> = {};
  for (const [k, f] of Object.entries(files)) {
    const warm = summary((await loadLoop(f, target, Number(o.repeat))).slice(1));
    const fresh: Timing[] = [];
    for (let i = 0; i < Number(o.fresh); i++) {
      const r = spawnSync(process.execPath, [self, '--load', f, '--target', target, '--repeat', '1'], { encoding: 'utf8', env: process.env });
      if (r.status !== 0) throw new Error(r.stderr);
      fresh.push((JSON.parse(r.stdout.trim().split('\n').pop()!) as { loads: Timing[] }).loads[0]!);
    }
    rows[k] = { warm, fresh: summary(fresh) };
  }
  const per = (a: number, b: number) => (((a - b) * 1e3) / (count - largeCount)).toFixed(2);
  for (const frame of ['warm', 'fresh'] as const) {
    const s = rows.small![frame];
    const l = rows.large![frame];
    console.log(
      `${target.padEnd(6)} ${frame === 'warm' ? 'repeat' : 'fresh '}  small ${s.median.toFixed(1)} (least ${s.min.toFixed(1)}, cpu ${s.cpu.toFixed(1)}) ms  ` +
        `large ${l.median.toFixed(1)} (least ${l.min.toFixed(1)}, cpu ${l.cpu.toFixed(1)}) ms  per tensor: ${per(s.median, l.median)} µs (least ${per(s.min, l.min)}, cpu ${per(s.cpu, l.cpu)})`,
    );
  }
}
if (!o.keep) for (const f of Object.values(files)) fs.rmSync(f, { force: true });
