/**
 * A model directory where a checkpoint is expected (`loadTensors('ckpt')`, `penstock load ckpt/`,
 * `penstock inspect ckpt`): its index, else its model.safetensors, else its *.safetensors files in
 * name order; a typed error naming what was looked for when it holds none.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { loadTensors, verifyTensorSet } from '../../src/index.js';
import { describeCheckpoint, closeCheckpoint } from '../../src/formats.js';
import { repoRoot, tmpDir } from '../helpers.js';
import { writeSafetensors, writeSharded, type TensorSpec } from '../tensor-writer.js';

const cli = path.join(repoRoot, 'dist/src/cli/main.js');
const run = (...args: string[]) => spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', env: { ...process.env, PENSTOCK_CUDA_LIBRARY: '/nonexistent/libcuda.so.1' } });
let n = 0;
const newDir = (name: string) => {
  const d = path.join(tmpDir(), `${name}-${++n}`);
  fs.mkdirSync(d, { recursive: true });
  return d;
};
const specs: TensorSpec[] = Array.from({ length: 6 }, (_, i) => ({ name: `layers.${i}.w`, dtype: 'F32', shape: [4, 4] }));

test('a directory with a sharded index loads through the index (a trailing slash too)', async () => {
  const dir = newDir('sharded');
  const { tensors, files } = writeSharded(dir, specs, 3);
  // A stray file beside the shards is not part of the checkpoint.
  writeSafetensors(path.join(dir, 'adapter_model.safetensors'), [{ name: 'layers.0.w', dtype: 'F32', shape: [1] }]);
  for (const given of [dir, dir + '/']) {
    using set = await loadTensors(given, { host: true });
    assert.equal(set.size, 6);
    assert.deepEqual(set.files.map((f) => f.path), files);
    for (const t of tensors) assert.ok(Buffer.from(set.get(t.name)!.data as Uint8Array).equals(t.data), t.name);
    assert.ok((await verifyTensorSet(set)).every((c) => c.match));
  }
  const cp = await describeCheckpoint(dir);
  assert.equal(cp.index?.path, path.join(dir, 'model.safetensors.index.json'));
  await closeCheckpoint(cp);
});

test('without an index: model.safetensors alone, else every *.safetensors file in name order', async () => {
  const single = newDir('single');
  writeSafetensors(path.join(single, 'model.safetensors'), specs.slice(0, 2));
  writeSafetensors(path.join(single, 'consolidated.safetensors'), specs.slice(0, 2));
  {
    using set = await loadTensors(single, { host: true });
    assert.deepEqual(set.files.map((f) => path.basename(f.path)), ['model.safetensors']);
  }
  const several = newDir('several');
  writeSafetensors(path.join(several, 'b.safetensors'), specs.slice(2, 4));
  writeSafetensors(path.join(several, 'a.safetensors'), specs.slice(0, 2));
  writeSafetensors(path.join(several, 'C.safetensors'), specs.slice(4));
  fs.writeFileSync(path.join(several, 'config.json'), '{}');
  fs.mkdirSync(path.join(several, 'sub.safetensors'));
  using set = await loadTensors(several, { host: true });
  assert.deepEqual(set.files.map((f) => path.basename(f.path)), ['C.safetensors', 'a.safetensors', 'b.safetensors']);
  assert.equal(set.size, 6);
});

test('a directory with no checkpoint is ERR_PENSTOCK_TENSOR_NO_CHECKPOINT, naming what was looked for', async () => {
  const empty = newDir('empty');
  fs.writeFileSync(path.join(empty, 'config.json'), '{}');
  await assert.rejects(loadTensors(empty, { host: true }), { code: 'ERR_PENSTOCK_TENSOR_NO_CHECKPOINT', message: /model\.safetensors\.index\.json.*\*\.safetensors/ });
  await assert.rejects(describeCheckpoint(empty), { code: 'ERR_PENSTOCK_TENSOR_NO_CHECKPOINT' });
});

test('penstock inspect DIR and penstock load DIR/ --host --verify', () => {
  const dir = newDir('cli');
  writeSharded(dir, specs, 2);
  const i = run('inspect', dir);
  assert.equal(i.status, 0, i.stderr);
  assert.match(i.stdout, /total: 6 tensors/);
  const l = run('load', dir + '/', '--host', '--verify');
  assert.equal(l.status, 0, l.stderr);
  assert.match(l.stdout, /Loaded 6 tensors/);
  assert.match(l.stdout, /Verified: all 6 tensors match/);
  const e = run('inspect', newDir('cli-empty'));
  assert.notEqual(e.status, 0);
  assert.match(e.stderr, /ERR_PENSTOCK_TENSOR_NO_CHECKPOINT|holds no checkpoint/);
});
