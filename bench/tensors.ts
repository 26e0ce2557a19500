/**
 * `npm run bench:tensors`: penstock against Python safetensors (`load_file(device="cuda:0")` and
 * `safe_open` + `get_tensor` per tensor), warm and cold, on a 7B-shaped checkpoint and an
 * MoE-shaped one with more than 15 000 tensors, both written here first. Every method runs in
 * processes of its own: the first load of a process is reported apart from the warm ones; each
 * cold load is a fresh process after the file's pages were dropped (and checked with mincore),
 * beside a `dd` O_DIRECT read of the same file just before it. Prints a table, writes JSON.
 *
 *   npm run bench:tensors -- [--dir DIR] [--out FILE] [--layers 42] [--moe-layers 40]
 *                            [--moe-experts 128] [--repeat 3] [--cold-repeat 2] [--quick] [--keep]
 *                            [--only 7B-shaped|MoE-shaped] [--methods penstock,load_file,safe_open]
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { describeDrop, dropFilePages } from '../src/cli/bench/cold.js';
import { textTable } from '../src/cli/kit/format.js';
import { median } from '../src/cli/bench/stats.js';
import { ddDirectRead, machineInfo } from '../src/cli/bench/system.js';
import { moeShapes, sevenBShapes, totalBytes, writeCheckpointFile, type TensorShape } from './tensor-checkpoints.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, '..', '..');
const { values: o } = parseArgs({
  options: {
    dir: { type: 'string', default: '/var/tmp/penstock-bench-tensors' },
    out: { type: 'string', default: 'bench-results/tensors.json' },
    layers: { type: 'string', default: '42' },
    'moe-layers': { type: 'string', default: '40' },
    'moe-experts': { type: 'string', default: '128' },
    repeat: { type: 'string', default: '3' },
    'cold-repeat': { type: 'string', default: '2' },
    only: { type: 'string' },
    methods: { type: 'string', default: 'penstock,load_file,safe_open' },
    python: { type: 'string', default: process.env.PENSTOCK_PYTHON ?? 'python3' },
    quick: { type: 'boolean', default: false },
    keep: { type: 'boolean', default: false },
  },
});
const repeat = Number(o.repeat);
const checkpoints: { id: string; shapes: TensorShape[] }[] = o.quick
  ? [{ id: '7B-shaped', shapes: sevenBShapes(1) }, { id: 'MoE-shaped', shapes: moeShapes(2, 16) }]
  : [{ id: '7B-shaped', shapes: sevenBShapes(Number(o.layers)) }, { id: 'MoE-shaped', shapes: moeShapes(Number(o['moe-layers']), Number(o['moe-experts'])) }];

interface Run { seconds: number; bytes: number; peakRssAboveBaseline?: number; gpuBytesBeyondSlab?: number; routes?: unknown; fallback?: unknown; direct?: boolean }
interface Row { checkpoint: string; tensors: number; bytes: number; method: string; state: 'first load' | 'warm' | 'cold'; gbps: number[]; medianGBps?: number; ddGBps?: number[]; drop?: string[]; peakRssAboveBaseline?: number; gpuBytesBeyondSlab?: number; routes?: unknown; fallback?: unknown; error?: string }

function child(method: string, file: string, n: number): { runs: Run[]; error?: string; baselineRss?: number; peakRss?: number } {
  const r = method === 'penstock'
    ? spawnSync(process.execPath, [path.join(repo, 'dist/bench/tensors-child.js'), file, '--repeat', String(n)], { encoding: 'utf8', maxBuffer: 64 << 20 })
    : spawnSync(o.python, [path.join(repo, 'bench/tensors_torch.py'), 'bench', method, String(n), file], { encoding: 'utf8', maxBuffer: 64 << 20 });
  if (r.status !== 0) return { runs: [], error: (r.stderr || r.error?.message || `exit ${r.status}`).trim().split('\n').slice(-3).join(' ') };
  const j = JSON.parse(r.stdout.trim().split('\n').pop()!);
  if (j.error) return { runs: [], error: j.error };
  return j.runs[0]?.bytes !== undefined ? j : { ...j, runs: j.runs.map((x: { seconds: number }) => ({ seconds: x.seconds, bytes: j.fileBytes })) };
}

const gb = (r: Run) => r.bytes / r.seconds / 1e9;
const rows: Row[] = [];
const report = { machine: machineInfo(), started: new Date().toISOString(), options: o, rows };
const save = () => {
  fs.mkdirSync(path.dirname(path.resolve(o.out)), { recursive: true });
  fs.writeFileSync(o.out, JSON.stringify(report, null, 2));
};

fs.mkdirSync(o.dir, { recursive: true });
const selected = checkpoints.filter((c) => !o.only || o.only.split(',').includes(c.id));
for (const cp of selected) {
  const file = path.join(o.dir, `${cp.id}.safetensors`);
  const bytes = totalBytes(cp.shapes);
  if (!fs.existsSync(file) || fs.statSync(file).size < bytes) {
    process.stderr.write(`writing ${file} (${cp.shapes.length} tensors, ${(bytes / 2 ** 30).toFixed(2)} GiB)…\n`);
    writeCheckpointFile(file, cp.shapes);
  }
  for (const method of o.methods.split(',')) {
    process.stderr.write(`${cp.id}: ${method} warm…\n`);
    spawnSync('cat', [file], { stdio: ['ignore', 'ignore', 'inherit'] }); // into the page cache
    const w = child(method, file, repeat + 1);
    const base = { checkpoint: cp.id, tensors: cp.shapes.length, bytes, method };
    if (w.error) {
      rows.push({ ...base, state: 'warm', gbps: [], error: w.error });
      continue;
    }
    const pen = (rs: Run[]) => (method === 'penstock' ? { peakRssAboveBaseline: Math.max(...rs.map((r) => r.peakRssAboveBaseline ?? NaN)), gpuBytesBeyondSlab: Math.max(...rs.map((r) => r.gpuBytesBeyondSlab ?? NaN)), routes: rs[0]!.routes, fallback: rs[0]!.fallback } : { peakRssAboveBaseline: (w.peakRss ?? 0) - (w.baselineRss ?? 0) });
    rows.push({ ...base, state: 'first load', gbps: [gb(w.runs[0]!)], ...pen(w.runs.slice(0, 1)) });
    rows.push({ ...base, state: 'warm', gbps: w.runs.slice(1).map(gb), ...pen(w.runs.slice(1)) });
    process.stderr.write(`${cp.id}: ${method} cold…\n`);
    const cold: Row = { ...base, state: 'cold', gbps: [], ddGBps: [], drop: [] };
    for (let i = 0; i < Number(o['cold-repeat']); i++) {
      dropFilePages(file);
      cold.ddGBps!.push(ddDirectRead(file).gbps);
      const d = dropFilePages(file);
      cold.drop!.push(describeDrop(d));
      if (!d.dropped) {
        cold.error = `pages could not be dropped: ${describeDrop(d)}`;
        break;
      }
      const c = child(method, file, 1);
      if (c.error) {
        cold.error = c.error;
        break;
      }
      cold.gbps.push(gb(c.runs[0]!));
      if (method === 'penstock') Object.assign(cold, pen(c.runs));
    }
    rows.push(cold);
    save();
  }
}
for (const r of rows) if (r.gbps.length) r.medianGBps = median(r.gbps);
save();

const lf = (r: Row) => rows.find((x) => x.checkpoint === r.checkpoint && x.state === r.state && x.method === 'load_file')?.medianGBps;
const table = rows.map((r) => {
  const ratio = r.medianGBps && lf(r) ? `${(r.medianGBps / lf(r)!).toFixed(1)}×` : '';
  const dd = r.ddGBps?.length && r.medianGBps ? `${(r.medianGBps / median(r.ddGBps)).toFixed(2)}× (dd ${median(r.ddGBps).toFixed(2)} GB/s)` : '';
  return [
    r.checkpoint, String(r.tensors), `${(r.bytes / 2 ** 30).toFixed(2)} GiB`, r.method, r.state,
    r.error ? `error: ${r.error}` : `${r.medianGBps!.toFixed(2)} (${Math.min(...r.gbps).toFixed(2)}–${Math.max(...r.gbps).toFixed(2)})`,
    ratio, dd,
    r.peakRssAboveBaseline !== undefined && Number.isFinite(r.peakRssAboveBaseline) ? `${(r.peakRssAboveBaseline / 2 ** 20).toFixed(0)} MiB` : '',
    r.gpuBytesBeyondSlab !== undefined && Number.isFinite(r.gpuBytesBeyondSlab) ? `${(r.gpuBytesBeyondSlab / 2 ** 20).toFixed(1)} MiB` : '',
  ];
});
process.stdout.write(textTable(['checkpoint', 'tensors', 'size', 'method', 'state', 'GB/s median (min–max)', 'vs load_file', 'vs dd O_DIRECT', 'peak RSS above base', 'GPU beyond slab'], table) + '\n');
const fb = rows.find((r) => r.method === 'penstock' && r.fallback)?.fallback as { code: string; message: string } | undefined;
if (fb) process.stdout.write(`penstock's route: ${JSON.stringify(rows.find((r) => r.method === 'penstock')?.routes)}; why not GPUDirect Storage: [${fb.code}] ${fb.message}\n`);
process.stdout.write(`JSON: ${o.out}\n`);
if (!o.keep) for (const cp of selected) fs.rmSync(path.join(o.dir, `${cp.id}.safetensors`), { force: true });
