/**
 * Batched reads and small reads on a real GPU. Without a GPU they skip with the reason;
 * `npm run test:gpu` (PENSTOCK_REQUIRE_GPU=1) makes that a failure instead.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { DeviceBuffer, open } from '../../src/index.js';
import { readBatch, type BatchReadResult } from '../../src/batch.js';
import { COPY_BATCH_MAX } from '../../src/plan/batch-plan.js';
import { cudaStatus } from '../../src/addon/runtime.js';
import { makeFile, shuffled } from '../helpers.js';
import { gpuOrSkip } from './guard.js';


/**
 * `n` ranges of a file of `fileSize` random bytes, range i at `[fileOffset, size] = rangeOf(i)`
 * (size at most `slot`), each into every other `slot`-byte slot of a GPU buffer in an order
 * shuffled by `seed`, so that no two are next to each other there. Every range and every gap
 * is checked byte for byte; the batch's result is returned.
 */
async function readApart(fileSize: number, n: number, slot: number, seed: number, rangeOf: (i: number) => [number, number]): Promise<BatchReadResult> {
  const { file, data } = makeFile(fileSize);
  await using f = await open(file);
  using dev = DeviceBuffer.alloc(2 * n * slot);
  await dev.copyFrom(Buffer.alloc(dev.byteLength, 0xee));
  const ranges = shuffled(n, seed).map((s, i) => {
    const [fileOffset, size] = rangeOf(i);
    return { fileOffset, size, target: dev, targetOffset: 2 * s * slot };
  });
  const res = await readBatch(ranges, { file: f });
  assert.equal(res.errors.size, 0);
  const back = await dev.toBuffer();
  ranges.forEach((r, i) => {
    assert.ok(back.subarray(r.targetOffset, r.targetOffset + r.size).equals(data.subarray(r.fileOffset, r.fileOffset + r.size)), `range ${i}`);
    assert.ok(back.subarray(r.targetOffset + r.size, r.targetOffset + 2 * slot).every((b) => b === 0xee), `gap after range ${i}`);
  });
  return res;
}

describe('GPU batches', () => {
  test('10 000 random ranges of 4 KiB into one buffer, byte-exact, few copies', async (t) => {
    if (!gpuOrSkip(t)) return;
    const { file, data } = makeFile(256 << 20);
    await using f = await open(file);
    const n = 10_000;
    using dev = DeviceBuffer.alloc(n * 4096);
    let x = 5;
    const ranges = Array.from({ length: n }, (_, i) => {
      x = (Math.imul(x, 1103515245) + 12345) >>> 0;
      return { fileOffset: (x % 65536) * 4096 + (i % 7), size: 4096, target: dev, targetOffset: i * 4096 };
    });
    const res = await readBatch(ranges, { file: f });
    assert.equal(res.errors.size, 0);
    assert.equal(res.totalBytes, n * 4096);
    const back = await dev.toBuffer();
    ranges.forEach((r, i) => assert.ok(back.subarray(i * 4096, (i + 1) * 4096).equals(data.subarray(r.fileOffset, r.fileOffset + 4096)), `range ${i}`));
    assert.ok(res.record.routes['posix-device']!.copies! < n / 50, `${res.record.routes['posix-device']!.copies} copies`);
  });

  test('10 000 ranges at every other slot, shuffled: byte-exact, the gaps untouched, copies in batch calls where the driver has them', async (t) => {
    if (!gpuOrSkip(t)) return;
    const n = 10_000;
    let x = 11;
    const res = await readApart(64 << 20, n, 4096, 5, (i) => {
      x = (Math.imul(x, 1103515245) + 12345) >>> 0;
      return [(x % 16384) * 4096 + (i % 5), 4096 - (i % 3)];
    });
    const route = res.record.routes['posix-device']!;
    assert.equal(route.copies, n, 'a copy per range');
    if (cudaStatus().copyBatch) {
      assert.ok(route.copyBatches! > 0 && route.copyBatches! < n / 8, `${route.copyBatches} batch calls`);
      assert.ok(!res.record.fallbacks.some((f) => f.code === 'COPY_BATCH_UNAVAILABLE'));
    } else {
      assert.equal(route.copyBatches, 0);
      assert.ok(res.record.fallbacks.some((f) => f.code === 'COPY_BATCH_UNAVAILABLE'));
    }
  });

  test('12 000 ranges of 32 bytes apart on the GPU: byte-exact, fills of 2048 copies in batch calls of at most COPY_BATCH_MAX', async (t) => {
    if (!gpuOrSkip(t)) return;
    const n = 12_000;
    let x = 3;
    const res = await readApart(1 << 20, n, 32, 8, () => {
      x = (Math.imul(x, 1103515245) + 12345) >>> 0;
      return [x % ((1 << 20) - 32), 32];
    });
    const route = res.record.routes['posix-device']!;
    assert.equal(route.copies, n);
    if (cudaStatus().copyBatch) assert.ok(route.copyBatches! >= Math.ceil(n / COPY_BATCH_MAX), `${route.copyBatches} batch calls`);
  });

  test('mid-size and small reads into the GPU are byte-exact', async (t) => {
    if (!gpuOrSkip(t)) return;
    const { file, data } = makeFile(40 << 20);
    await using f = await open(file);
    using dev = DeviceBuffer.alloc(32 << 20);
    for (const [off, size] of [[1, 4096], [4096, 65536], [3, 1 << 20], [12345, 16 << 20], [0, 32 << 20]] as const) {
      const rec = await f.readRecorded(dev, { fileOffset: off, size });
      assert.equal(rec.bytes, size);
      assert.ok((await dev.subarray(0, size).toBuffer()).equals(data.subarray(off, off + size)), `${size} at ${off}`);
      // Past the calling thread's limit, mid-size reads are gathered (none here is O_DIRECT).
      if (size > (1 << 20)) assert.ok(rec.way.kind === 'staged' && rec.way.variant === 'gathered' && rec.way.orderedCopies > 0, `${size} at ${off}: gathered`);
    }
  });

  test('two mid-size reads at once: each byte-exact, whether gathered or through the bounce halves', async (t) => {
    if (!gpuOrSkip(t)) return;
    const { file, data } = makeFile(48 << 20);
    await using f = await open(file);
    using a = DeviceBuffer.alloc(24 << 20);
    using b = DeviceBuffer.alloc(24 << 20);
    for (let round = 0; round < 5; round++) {
      await Promise.all([a.copyFrom(Buffer.alloc(a.byteLength, round)), b.copyFrom(Buffer.alloc(b.byteLength, round))]);
      const recs = await Promise.all([f.readRecorded(a, { fileOffset: round * 4096 + 1 }), f.readRecorded(b, { fileOffset: (24 << 20) - round })]);
      assert.ok(recs.some((r) => r.way.kind === 'staged' && r.way.variant === 'gathered'), `round ${round}: one of them gathered`);
      assert.ok((await a.toBuffer()).equals(data.subarray(round * 4096 + 1, round * 4096 + 1 + (24 << 20))), `round ${round}: a`);
      assert.ok((await b.toBuffer()).equals(data.subarray((24 << 20) - round, (48 << 20) - round)), `round ${round}: b`);
    }
  });
});
