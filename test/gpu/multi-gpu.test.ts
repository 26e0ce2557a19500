/**
 * Several GPUs of one machine: tensor-parallel row shards and checkpoint shards spread over
 * every GPU (checked against Python safetensors), CUDA IPC into a process that sees the GPUs in
 * another order (matched by PCI bus id), and a small read into one GPU while another is busy.
 * With fewer than two GPUs they skip with the reason; PENSTOCK_REQUIRE_GPUS=N makes a machine of
 * fewer than N GPUs a failure instead. Without Python's torch and safetensors the Python checks
 * skip with the reason (PENSTOCK_REQUIRE_PYTHON=1 makes that a failure).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test, type TestContext } from 'node:test';
import { digestHex } from '../../src/memory/digest.js';
import { DeviceBuffer, deviceCount, deviceInfo, loadTensors, open } from '../../src/index.js';
import { tensorSha256 } from '../../src/formats.js';
import { exportDeviceBuffer } from '../../src/ipc.js';
import { sevenBShapes, writeCheckpointFile, writeShardedCheckpoint } from '../../bench/tensor-checkpoints.js';
import { makeFile, pattern, repoRoot, tmpDir } from '../helpers.js';
import { importEveryEntry } from '../entry-points.js';
import { gpuOrSkip } from './guard.js';

const python = process.env.PENSTOCK_PYTHON ?? 'python3';
const script = path.join(repoRoot, 'bench/tensors_torch.py');

/** True when this machine has at least `n` GPUs; otherwise skips `t` (or fails it, see above). */
function gpusOrSkip(t: TestContext, n = 2): boolean {
  if (!gpuOrSkip(t)) return false;
  const have = deviceCount();
  if (have >= n) return true;
  const required = Number(process.env.PENSTOCK_REQUIRE_GPUS ?? 0);
  if (required > have) assert.fail(`PENSTOCK_REQUIRE_GPUS=${required} but this machine has ${have} GPU(s)`);
  t.skip(`needs ${n} GPUs, this machine has ${have}`);
  return false;
}

function pythonOrSkip(t: TestContext): boolean {
  const r = spawnSync(python, ['-c', 'import torch, safetensors; assert torch.cuda.device_count() > 1, "torch sees fewer than 2 GPUs"'], { encoding: 'utf8' });
  if (r.status === 0) return true;
  const why = `${python} with torch (2+ GPUs) and safetensors is not available (${(r.stderr || r.error?.message || '').trim().split('\n').pop()})`;
  if (process.env.PENSTOCK_REQUIRE_PYTHON === '1') assert.fail(why);
  t.skip(why);
  return false;
}

/** Python's hashes of every tensor (or of row shard `index` of `count`, on `device`). */
function pythonHashes(args: string[]): Record<string, { sha256: string; shape: number[] }> {
  const r = spawnSync(python, [script, ...args], { encoding: 'utf8', maxBuffer: 64 << 20 });
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout) as Record<string, { sha256: string; shape: number[] }>;
}

describe('several GPUs', () => {
  // 2 layers: about 0.9 GiB, every layer's 2-D tensors split by rows.
  const shapes = sevenBShapes(2);
  const dir = path.join(tmpDir(), 'multi-gpu');

  test('tensor-parallel: row shard g of n on GPU g, every tensor equal to Python load_file sliced alike', async (t) => {
    if (!gpusOrSkip(t) || !pythonOrSkip(t)) return;
    const n = deviceCount();
    fs.mkdirSync(dir, { recursive: true });
    const file = path.join(dir, 'model.safetensors');
    writeCheckpointFile(file, shapes);
    const sets = await Promise.all(Array.from({ length: n }, (_, g) => loadTensors(file, { device: g, rows: { index: g, count: n } })));
    try {
      for (let g = 0; g < n; g++) {
        const expected = pythonHashes(['rows', String(g), String(n), String(g), file]);
        const set = sets[g]!;
        assert.deepEqual(set.place, { kind: 'device', device: g });
        assert.equal(set.size, shapes.length);
        for (const v of set.tensors) {
          assert.deepEqual(v.shape, expected[v.name]!.shape, `${v.name} on GPU ${g}`);
          assert.equal(await tensorSha256(v), expected[v.name]!.sha256, `${v.name} on GPU ${g}`);
        }
      }
      t.diagnostic(`${n} GPUs, ${shapes.length} tensors each: ${sets.map((s, g) => `GPU ${g} ${s.bytes} bytes in ${s.seconds.toFixed(3)} s`).join(', ')}`);
    } finally {
      for (const s of sets) s.free();
    }
  });

  test('checkpoint shards spread over the GPUs (shard k on GPU k mod n), equal to Python load_file', async (t) => {
    if (!gpusOrSkip(t) || !pythonOrSkip(t)) return;
    const n = deviceCount();
    const { files } = writeShardedCheckpoint(path.join(dir, 'sharded'), shapes, Math.max(3, n));
    const expected = pythonHashes(['hashes', ...files]);
    const sets = await Promise.all(files.map((f, k) => loadTensors(f, { device: k % n })));
    try {
      let seen = 0;
      for (const [k, set] of sets.entries()) {
        assert.deepEqual(set.place, { kind: 'device', device: k % n });
        for (const v of set.tensors) {
          assert.equal(await tensorSha256(v), expected[v.name]!.sha256, `${v.name} (shard ${k}, GPU ${k % n})`);
          seen++;
        }
      }
      assert.equal(seen, shapes.length);
    } finally {
      for (const s of sets) s.free();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test('CUDA IPC: memory of the last GPU opened by a process that sees the GPUs in reverse order', async (t) => {
    if (!gpusOrSkip(t)) return;
    const n = deviceCount();
    const last = n - 1;
    const data = pattern((16 << 20) + 5, 71);
    using buf = DeviceBuffer.alloc(data.length, { device: last });
    await buf.copyFrom(data);
    using e = exportDeviceBuffer(buf);
    const order = Array.from({ length: n }, (_, i) => n - 1 - i).join(',');
    const body = `${importEveryEntry()}
      const b = p.importDeviceBuffer(process.argv[1]);
      const { digestHex } = await import(${JSON.stringify(path.join(repoRoot, 'dist/src/memory/digest.js'))});
      console.log(JSON.stringify({ device: b.device, bus: p.deviceInfo(b.device).pciBusId, sha: digestHex('sha256', await b.toBuffer()) }));
      b.free();`;
    // FAKE_CUDA_VISIBLE_DEVICES: the test driver's name for the same setting, so this runs on it too.
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', body, String(e)], {
      encoding: 'utf8', timeout: 120_000, env: { ...process.env, CUDA_VISIBLE_DEVICES: order, FAKE_CUDA_VISIBLE_DEVICES: order },
    });
    assert.equal(r.status, 0, r.stderr);
    const out = JSON.parse(r.stdout.trim().split('\n').at(-1)!) as { device: number; bus: string; sha: string };
    assert.equal(out.device, 0, 'the last GPU is the first one the other process sees');
    assert.equal(out.bus.toLowerCase(), deviceInfo(last).pciBusId.toLowerCase());
    assert.equal(out.sha, digestHex('sha256', data));
  });

  test('a small read into GPU 0 settles while a large read into GPU 1 is still running', async (t) => {
    if (!gpusOrSkip(t)) return;
    const big = makeFile(1 << 30, 72);
    const small = makeFile(1 << 20, 73);
    await using fb = await open(big.file);
    await using fs0 = await open(small.file);
    using dev1 = DeviceBuffer.alloc(1 << 30, { device: 1 });
    using dev0 = DeviceBuffer.alloc(4096, { device: 0 });
    const order: string[] = [];
    const large = fb.read(dev1).then(() => order.push('large'));
    await fs0.read(dev0, { fileOffset: 8192 });
    order.push('small');
    await large;
    assert.deepEqual(order, ['small', 'large'], 'the small read did not wait for the other GPU');
    assert.ok((await dev0.toBuffer()).equals(small.data.subarray(8192, 12288)));
    assert.equal(digestHex('sha256', await dev1.toBuffer()), digestHex('sha256', big.data));
  });
});
