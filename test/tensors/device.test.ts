/**
 * The loader's device path through the fake driver: one slab per load, views of it, bytes
 * exact, route records per file (cuFile, and the staged path with its fallback reason), pinned
 * host targets, filters into the GPU, failures that free the slab.
 */
import { useFakeDriver, withEnv, tmpDir } from '../helpers.js';
useFakeDriver({ FAKE_CUDA_DEVICE_COUNT: '2' });

import assert from 'node:assert/strict';
import path from 'node:path';
import { before, describe, test } from 'node:test';
import type { DeviceBuffer as DB } from '../../src/index.js';
const p = await import('../../src/index.js');
const { DeviceBuffer, loadTensors, memoryInfo, verifyTensorSet, assertVerified } = p;
const { writeSafetensors, writeSharded } = await import('../tensor-writer.js');
const { BATCHED_SPAN_MAX } = await import('../../src/tensors/span-reads.js');

let n = 0;
const file = (name = 'd') => path.join(tmpDir(), `${name}-${++n}.safetensors`);
const specs = Array.from({ length: 9 }, (_, i) => ({ name: `model.layers.${i}.weight`, dtype: (i % 3 === 0 ? 'F8_E4M3' : 'BF16') as 'BF16', shape: [64 + i, 256] }));

describe('into GPU memory (fake driver)', () => {
  // cuFile's driver opens in the background at the first GPU use, and a load that starts before it
  // is open is staged (CUFILE_OPENING); a prepared GPU has it open, so these loads meet cuFile.
  before(() => p.prepareGpu(1));

  test('a sharded checkpoint into GPU 1: one slab, DeviceBuffer views, bytes exact, cuFile route recorded', async () => {
    const { index, tensors } = writeSharded(path.join(tmpDir(), `dev-${++n}`), specs, 3, { padding: 3 });
    const free0 = memoryInfo(1).free;
    const set = await loadTensors(index, { device: 1 });
    assert.deepEqual(set.place, { kind: 'device', device: 1 });
    const slab = set.slab as DB;
    assert.ok(slab instanceof DeviceBuffer);
    assert.equal(slab.device, 1);
    // The slab is the only allocation the load made.
    assert.equal(free0 - memoryInfo(1).free, slab.byteLength);
    for (const t of tensors) {
      const v = set.get(t.name)!;
      assert.ok(v.data instanceof DeviceBuffer);
      assert.equal((v.data as DB).ptr, slab.ptr + BigInt(v.byteOffset));
      assert.ok((await (v.data as DB).toBuffer()).equals(t.data), t.name);
    }
    assert.equal(set.files.length, 3);
    for (const f of set.files) {
      assert.equal(f.operations, 1);
      assert.deepEqual(f.fallbacks, []);
      assert.deepEqual(Object.keys(f.routes), ['gds']);
      assert.equal(f.routes.gds!.bytes, f.bytes);
    }
    const checks = await verifyTensorSet(set);
    assertVerified(checks);
    assert.equal(checks.length, tensors.length);
    set.free();
    set.free();
    assert.equal(slab.freed, true);
    assert.equal(memoryInfo(1).free, free0);
    assert.throws(() => set.get('x'), { code: 'ERR_PENSTOCK_TENSOR_SET_FREED' });
  });

  test('where cuFile refuses the file: the staged route, with the fallback reason per file', async () => {
    const f = file('staged');
    const { tensors } = writeSafetensors(f, specs);
    await withEnv({ FAKE_CUFILE_REGISTER_ERROR: '5027' }, async () => {
      using set = await loadTensors(f, { device: 0 });
      const rec = set.files[0]!;
      assert.deepEqual(rec.fallbacks.map((r) => r.code), ['CUFILE_HANDLE_REFUSED']);
      assert.ok(rec.routes['posix-device']);
      assert.equal(rec.routes['posix-device']!.bytes + (rec.routes['mapped-device']?.bytes ?? 0), rec.bytes);
      assert.ok(rec.ops >= 1);
      for (const t of tensors) assert.ok((await (set.get(t.name)!.data as DB).toBuffer()).equals(t.data));
    });
  });

  test('filters and row ranges into the GPU read only the chosen bytes', async () => {
    const f = file('rows');
    const { tensors } = writeSafetensors(f, specs);
    using set = await loadTensors(f, { device: 0, filter: { prefix: 'model.layers.1' }, rows: { index: 1, count: 4 } });
    const t = tensors[1]!;
    const v = set.get(t.name)!;
    const rowBytes = 256 * 2;
    const begin = Math.floor((1 * 65) / 4);
    const end = Math.floor((2 * 65) / 4);
    assert.deepEqual(v.shape, [end - begin, 256]);
    assert.ok((await (v.data as DB).toBuffer()).equals(t.data.subarray(begin * rowBytes, end * rowBytes)));
    assert.equal(set.bytes, (end - begin) * rowBytes);
    assertVerified(await verifyTensorSet(set));
  });

  test('small tensors read apart go in one batch per file, large ones alone: bytes exact, every span counted, a failed copy frees the slab', async () => {
    const f = file('scattered');
    // 60 tensors, every tenth of 2 MiB (beyond the batch's span limit), the others of 2-3 KiB.
    const scattered = Array.from({ length: 60 }, (_, i) => ({ name: `e.${i}`, dtype: 'BF16' as const, shape: i % 10 === 0 ? [1024, 1024] : [16 + (i % 7), 64] }));
    const { tensors } = writeSafetensors(f, scattered);
    const chosen = tensors.filter((_, i) => i % 2 === 0);
    const big = chosen.filter((t) => t.data.length > BATCHED_SPAN_MAX);
    assert.equal(big.length, 6);
    {
      using set = await loadTensors(f, { device: 0, filter: chosen.map((t) => t.name), coalesceGap: 0 });
      for (const t of chosen) assert.ok((await (set.get(t.name)!.data as DB).toBuffer()).equals(t.data), t.name);
      const rec = set.files[0]!;
      assert.equal(rec.operations, chosen.length);
      assert.equal(rec.bytes, chosen.reduce((n, t) => n + t.data.length, 0));
      // The small ones by preads through staging; the large ones by cuFile, as any large read.
      assert.equal(rec.routes['posix-device']!.bytes, rec.bytes - big.reduce((n, t) => n + t.data.length, 0));
      assert.equal(rec.routes.gds!.bytes, big.reduce((n, t) => n + t.data.length, 0));
      assertVerified(await verifyTensorSet(set));
    }
    {
      using pinned = await loadTensors(f, { host: 'pinned', filter: chosen.map((t) => t.name), coalesceGap: 0 });
      for (const t of chosen) assert.ok(Buffer.from(pinned.get(t.name)!.data as Uint8Array).equals(t.data), t.name);
      assert.equal(pinned.files[0]!.operations, chosen.length);
    }
    const free0 = memoryInfo(0).free;
    await withEnv({ FAKE_CUDA_FAIL_COPY_AFTER: '0:scattered' }, async () => {
      await assert.rejects(loadTensors(f, { device: 0, filter: chosen.filter((t) => t.data.length <= BATCHED_SPAN_MAX).map((t) => t.name), coalesceGap: 0 }), { code: 'CUDA_ERROR_ILLEGAL_ADDRESS' });
    });
    assert.equal(memoryInfo(0).free, free0);
  });

  test('pinned host target', async () => {
    const f = file('pinned');
    const { tensors } = writeSafetensors(f, specs);
    using set = await loadTensors(f, { host: 'pinned' });
    assert.ok(set.pinnedBuffer);
    assert.deepEqual(set.place, { kind: 'host', pinned: true });
    for (const t of tensors) assert.ok(Buffer.from(set.get(t.name)!.data as Uint8Array).equals(t.data));
    assert.deepEqual(Object.keys(set.files[0]!.routes), ['posix-host']);
  });

  test('a failing copy rejects the load and frees the slab', async () => {
    const f = file('fail');
    writeSafetensors(f, specs);
    const free0 = memoryInfo(0).free;
    await withEnv({ FAKE_CUFILE_REGISTER_ERROR: '5027', FAKE_CUDA_FAIL_COPY_AFTER: '0:tensors' }, async () => {
      await assert.rejects(loadTensors(f, { device: 0 }), { code: 'CUDA_ERROR_ILLEGAL_ADDRESS' });
    });
    assert.equal(memoryInfo(0).free, free0);
  });

  test('a malformed header allocates nothing on the GPU', async () => {
    const f = file('badhdr');
    const { writeRawSafetensors } = await import('../tensor-writer.js');
    writeRawSafetensors(f, '{"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 8]}}', 16);
    const free0 = memoryInfo(0).free;
    await assert.rejects(loadTensors(f, { device: 0 }), { code: 'ERR_PENSTOCK_TENSOR_SIZE_MISMATCH' });
    assert.equal(memoryInfo(0).free, free0);
  });
});
