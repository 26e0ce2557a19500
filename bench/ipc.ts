/**
 * `npm run bench:ipc`: the CUDA IPC hand-off of a model-shaped checkpoint. penstock loads it into
 * one GPU slab (`loadTensors`) and exports it (`exportTensorSet`); then another Node process and Python (PyTorch's
 * `_new_shared_cuda`, CuPy + DLPack) open every tensor, and Python checks each one bitwise
 * against `safetensors.torch.load_file`. Prints times to export and to open, and the GPU memory
 * each opener added. Numbers only: nothing here passes or fails on speed.
 *
 *   npm run bench:ipc -- --size 4GiB [--python python3] [--modes torch,cupy] [--repeat 3] [--json out.json]
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { hasGpu, loadTensors, memoryInfo } from '../src/index.js';
import { exportTensorSet } from '../src/ipc.js';
import { runtimeInfo } from '../src/doctor.js';
import { parseSize } from '../src/measure.js';
import { decoderDimsFor, handOffShapes, writeCheckpointFile } from './tensor-checkpoints.js';

const { values } = parseArgs({
  options: {
    size: { type: 'string', default: '4GiB' },
    python: { type: 'string', default: process.env.PENSTOCK_PYTHON ?? 'python3' },
    modes: { type: 'string', default: 'torch,cupy' },
    repeat: { type: 'string', default: '3' },
    dir: { type: 'string', default: os.tmpdir() },
    json: { type: 'string' },
  },
});
if (!hasGpu()) {
  console.log(`no GPU: nothing to measure (${runtimeInfo().cuda.error ?? runtimeInfo().cuda.initError?.code})`);
  process.exit(0);
}
const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const script = path.join(repoRoot, 'test/gpu/ipc_torch.py');
const entries = ['index', 'ipc', 'doctor'].map((e) => path.join(repoRoot, `dist/src/${e}.js`));
const repeat = Number(values.repeat);
const file = path.join(values.dir!, `penstock-ipc-${process.pid}.safetensors`);
const manifestFile = path.join(values.dir!, `penstock-ipc-${process.pid}.json`);

const shape = decoderDimsFor(parseSize(values.size!));
console.log(`Writing a model-shaped checkpoint: ${JSON.stringify(shape)}`);
writeCheckpointFile(file, handOffShapes(shape));
const fileBytes = fs.statSync(file).size;
const freeBefore = memoryInfo(0).free;
let t0 = performance.now();
const tensors = await loadTensors(file);
const loadMs = performance.now() - t0;
t0 = performance.now();
const exported = exportTensorSet(tensors);
const exportMs = performance.now() - t0;
fs.writeFileSync(manifestFile, JSON.stringify(exported));
console.log(`Loaded ${fileBytes} bytes (${tensors.size} tensors) in ${loadMs.toFixed(1)} ms; exported in ${exportMs.toFixed(3)} ms; GPU memory used ${freeBefore - memoryInfo(0).free} bytes`);

const rows: Record<string, unknown>[] = [];
for (let i = 0; i < repeat; i++) {
  const body = `const p = Object.assign({}, ...(await Promise.all(${JSON.stringify(entries)}.map((e) => import(e))))); const before = p.memoryInfo(0).free;
    const text = (await import('node:fs')).readFileSync(process.argv[1], 'utf8');
    const t0 = performance.now(); const set = p.openTensorManifest(text); const openMs = performance.now() - t0;
    const drop = before - p.memoryInfo(0).free; const pinned = p.runtimeInfo().pinnedBytes;
    set.close(); console.log(JSON.stringify({ openMs, drop, pinned, tensors: set.tensors.size }));`;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', body, manifestFile], { encoding: 'utf8' });
  const out = r.status === 0 ? JSON.parse(r.stdout.trim().split('\n').at(-1)!) : { error: r.stderr.trim() };
  rows.push({ opener: 'node', run: i + 1, openSeconds: out.openMs / 1000, deviceFreeDrop: out.drop, pinnedBytes: out.pinned, tensors: out.tensors, error: out.error });
}
for (const mode of values.modes!.split(',').filter(Boolean)) {
  for (let i = 0; i < repeat; i++) {
    const r = spawnSync(values.python!, [script, manifestFile, '--mode', mode, ...(i === 0 ? ['--safetensors', file] : [])], { encoding: 'utf8' });
    let out: Record<string, unknown>;
    try {
      out = JSON.parse(r.stdout.trim().split('\n').at(-1)!);
    } catch {
      out = { ok: false, error: (r.error?.message ?? r.stderr.trim().split('\n').at(-1)) || 'no output' };
    }
    rows.push({ opener: mode, run: i + 1, ...out });
  }
}

console.log('\nopener  run  tensors  open s     allocated+  device free -   checked vs load_file');
for (const r of rows) {
  const fmt = (v: unknown, w: number) => String(v ?? '-').padEnd(w);
  const checked = r.compared !== undefined ? `${r.ok ? 'equal' : `${r.mismatchCount} differ`} (${Number(r.loadFileSeconds).toFixed(2)} s load_file)` : r.error ?? '';
  console.log(`${fmt(r.opener, 8)}${fmt(r.run, 5)}${fmt(r.tensors, 9)}${fmt(typeof r.openSeconds === 'number' ? r.openSeconds.toFixed(4) : undefined, 10)}${fmt(r.allocatedGrowth, 12)}${fmt(r.deviceFreeDrop, 16)}${checked}`);
}
if (values.json)
  fs.writeFileSync(values.json, JSON.stringify({ shape, bytes: fileBytes, tensors: tensors.size, loadMs, exportMs, gpu: runtimeInfo().cuda, rows }, null, 2));
exported.release();
tensors.free();
fs.rmSync(file, { force: true });
fs.rmSync(manifestFile, { force: true });
