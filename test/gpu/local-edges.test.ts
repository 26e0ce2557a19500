/**
 * Edges of local loads on a real GPU: a model directory into the GPU, a file whose tensors a
 * typed array could not view in place (GPU layout as the file has it, host layout aligned, both
 * byte-exact against the file), and a tensor with no elements beside huge dimensions exported
 * through CUDA IPC. Skips with the reason without a GPU (`npm run test:gpu` makes that a failure).
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { loadTensors, verifyTensorSet } from '../../src/index.js';
import { exportTensorSet } from '../../src/ipc.js';
import { tmpDir } from '../helpers.js';
import { writeRawSafetensors, writeSafetensors, writeSharded, type TensorSpec } from '../tensor-writer.js';
import { gpuOrSkip } from './guard.js';

const specs: TensorSpec[] = [
  { name: 'a', dtype: 'U8', shape: [3] },
  { name: 'b', dtype: 'F32', shape: [1000, 17] },
  { name: 'c', dtype: 'BF16', shape: [7] },
  { name: 'd', dtype: 'F64', shape: [33, 3] },
  { name: 'e', dtype: 'I64', shape: [5] },
];

test('a model directory loads into the GPU through its index, every tensor equal to its file', async (t) => {
  if (!gpuOrSkip(t)) return;
  const dir = path.join(tmpDir(), 'gpu-model-dir');
  writeSharded(dir, specs, 2);
  using set = await loadTensors(dir, { device: 0 });
  assert.equal(set.size, specs.length);
  assert.ok((await verifyTensorSet(set)).every((c) => c.match));
});

test('misaligned tensors: GPU keeps the file layout, host gets aligned values; both byte-exact', async (t) => {
  if (!gpuOrSkip(t)) return;
  const f = path.join(tmpDir(), 'gpu-misaligned.safetensors');
  const { tensors } = writeSafetensors(f, specs, { padding: 1 });
  using dev = await loadTensors(f, { device: 0 });
  using host = await loadTensors(f, { host: 'pinned' });
  assert.ok((await verifyTensorSet(dev)).every((c) => c.match));
  assert.ok((await verifyTensorSet(host)).every((c) => c.match));
  for (const x of tensors) {
    const v = host.get(x.name)!;
    assert.ok(Buffer.from(v.data as Uint8Array).equals(x.data), x.name);
    if (x.dtype !== 'BF16') assert.ok(v.values && v.values.byteOffset % (v.values as { BYTES_PER_ELEMENT: number }).BYTES_PER_ELEMENT === 0, x.name);
    assert.equal(dev.get(x.name)!.values, undefined);
  }
});

test('a tensor with no elements beside 2^40-sized dimensions exports with exact strides', async (t) => {
  if (!gpuOrSkip(t)) return;
  const f = path.join(tmpDir(), 'gpu-empty.safetensors');
  const big = 2 ** 40;
  writeRawSafetensors(f, JSON.stringify({ e: { dtype: 'F32', shape: [0, big, big], data_offsets: [0, 0] }, w: { dtype: 'F32', shape: [2], data_offsets: [0, 8] } }), 8);
  using set = await loadTensors(f, { device: 0 });
  using e = exportTensorSet(set);
  const rec = e.manifest.tensors.find((x) => x.name === 'e')!;
  assert.deepEqual(rec.strides, [0, big, 1]);
  assert.ok(fs.existsSync(f));
});
