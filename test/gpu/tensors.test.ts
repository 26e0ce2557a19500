/**
 * Tensor loading on a real GPU, checked against Python safetensors: a 7B-shaped checkpoint of
 * more than 4 GiB (a single file, and the same tensors in 3 shards) loaded by penstock and by
 * `safetensors.torch.load_file(device="cuda:0")`; every tensor's sha256, taken from its bytes in
 * GPU memory on both sides, must be equal. Skips with the reason without a GPU or without
 * Python's torch and safetensors (`npm run test:gpu` makes either a failure).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test, type TestContext } from 'node:test';
import { hasGpu, loadTensors, memoryInfo } from '../../src/index.js';
import { tensorSha256 } from '../../src/formats.js';
import { runtimeInfo } from '../../src/doctor.js';
import { sevenBShapes, totalBytes, writeCheckpointFile, writeShardedCheckpoint } from '../../bench/tensor-checkpoints.js';
import { repoRoot, tmpDir } from '../helpers.js';

const required = process.env.PENSTOCK_REQUIRE_GPU === '1';
const python = process.env.PENSTOCK_PYTHON ?? 'python3';
const script = path.join(repoRoot, 'bench/tensors_torch.py');

function why(): string | undefined {
  if (!hasGpu()) return `no usable GPU (${runtimeInfo().cuda.error ?? runtimeInfo().cuda.initError?.code ?? 'no device'})`;
  const r = spawnSync(python, ['-c', 'import torch, safetensors; assert torch.cuda.is_available(), "torch sees no CUDA device"'], { encoding: 'utf8' });
  if (r.status !== 0) return `${python} with torch (CUDA) and safetensors is not available (${(r.stderr || r.error?.message || '').trim().split('\n').pop()})`;
  return undefined;
}
const reason = why();

function skipUnlessReady(t: TestContext): boolean {
  if (!reason) return true;
  if (required) assert.fail(`GPU test required but ${reason}`);
  t.skip(reason);
  return false;
}

/** Python's hashes of every tensor after load_file(device="cuda:0"). */
function pythonHashes(files: string[]): Record<string, { sha256: string; shape: number[] }> {
  const r = spawnSync(python, [script, 'hashes', ...files], { encoding: 'utf8', maxBuffer: 64 << 20 });
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout);
}

describe('tensor loading on the GPU, against Python safetensors', () => {
  // 10 layers: 4.26 GiB.
  const shapes = sevenBShapes(10);
  const dir = path.join(tmpDir(), 'seven-b');
  const single = path.join(dir, 'model.safetensors');

  test('7B-shaped single file (≥ 4 GiB): every tensor equal to load_file(device="cuda:0")', async (t) => {
    if (!skipUnlessReady(t)) return;
    assert.ok(totalBytes(shapes) >= 4 * 2 ** 30);
    fs.mkdirSync(dir, { recursive: true });
    writeCheckpointFile(single, shapes);
    const expected = pythonHashes([single]);
    const free0 = memoryInfo(0).free;
    using set = await loadTensors(single, { device: 0 });
    // The slab is the one allocation (CUDA rounds it up to its page size; the context may add a little).
    const used = free0 - memoryInfo(0).free;
    const slabBytes = (set.slab as { byteLength: number }).byteLength;
    assert.ok(used >= slabBytes && used <= slabBytes + (64 << 20), `${used} bytes used for a ${slabBytes}-byte slab`);
    assert.equal(set.size, shapes.length);
    for (const v of set.tensors) {
      assert.equal(await tensorSha256(v), expected[v.name]!.sha256, v.name);
      assert.deepEqual(v.shape, expected[v.name]!.shape);
    }
    t.diagnostic(`${set.bytes} bytes in ${set.seconds.toFixed(3)} s (${(set.bytes / set.seconds / 1e9).toFixed(2)} GB/s), routes ${JSON.stringify(set.routeTotals())}${set.files[0]!.fallbacks.length ? `, fallbacks ${set.files[0]!.fallbacks.map((r) => r.code).join(' ')}` : ''}`);
  });

  test('the same tensors in 3 shards through the index: equal to load_file of each shard', async (t) => {
    if (!skipUnlessReady(t)) return;
    const { index, files } = writeShardedCheckpoint(path.join(dir, 'sharded'), shapes, 3);
    const expected = pythonHashes(files);
    using set = await loadTensors(index, { device: 0 });
    assert.equal(set.files.length, 3);
    assert.equal(set.size, shapes.length);
    for (const v of set.tensors) assert.equal(await tensorSha256(v), expected[v.name]!.sha256, v.name);
    for (const f of set.files) assert.equal(f.operations, 1);
    t.diagnostic(`${set.bytes} bytes in ${set.seconds.toFixed(3)} s (${(set.bytes / set.seconds / 1e9).toFixed(2)} GB/s)`);
    fs.rmSync(dir, { recursive: true, force: true });
  });
});
