/**
 * Batched reads whose ranges land apart on the GPU, so that each range needs its own copy:
 * through the fake driver, a fill of staging with several such copies goes in one batch call
 * where the driver has one (cuMemcpyBatchAsync_v2; cuMemcpyBatchAsync, the CUDA 12.8 form, in
 * the copy-batch-v1 build), and one call per range, with a reason in the record, where it has
 * none (the no-copy-batch build). A process loads one driver, so each build runs in a child:
 * this file run with PENSTOCK_TEST_DRIVER_VARIANT set prints what it saw as JSON.
 */
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { fakeDriverDir, makeFile, shuffled, useFakeDriver, withEnv } from '../helpers.js';

const variant = process.env.PENSTOCK_TEST_DRIVER_VARIANT;
useFakeDriver({ FAKE_CUDA_ASYNC_DELAY_US: '20', FAKE_CUDA_DEVICE_COUNT: '2' });
if (variant) process.env.PENSTOCK_CUDA_LIBRARY = path.join(fakeDriverDir, variant, 'libcuda.so.1');

import assert from 'node:assert/strict';
import fs from 'node:fs';
import { describe, test } from 'node:test';
const { DeviceBuffer, configure, open } = await import('../../src/index.js');
const { readBatch } = await import('../../src/batch.js');
const { COPY_BATCH_MAX, COPY_BATCH_MIN, columnsOf, planBatch } = await import('../../src/plan/batch-plan.js');
const { native } = await import('../../src/addon/binding.js');
const { cudaStatus } = await import('../../src/addon/runtime.js');

const KiB = 1024;

interface Seen {
  copyBatch: string | null;
  ranges: number;
  copies: number;
  copyBatches: number;
  fallback: string | null;
}

/**
 * `n` ranges of `size` bytes from random places in a file, each into every other `size`-byte
 * slot of a GPU buffer, shuffled: byte-exact, the gaps untouched. The record of the device route.
 */
async function tiny(n: number, size: number): Promise<{ copies: number; copyBatches: number }> {
  configure({ threads: 1, bounceBufferSize: 256 * KiB });
  const { file, data } = makeFile(1 << 20);
  await using f = await open(file, 'r', { compatMode: 'on' });
  using dev = DeviceBuffer.alloc(2 * n * size);
  let x = 9;
  const ranges = shuffled(n, 4).map((s) => {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    return { fileOffset: x % ((1 << 20) - size), size, target: dev, targetOffset: 2 * s * size };
  });
  const res = await readBatch(ranges, { file: f });
  assert.equal(res.errors.size, 0);
  const back = await dev.toBuffer();
  ranges.forEach((r, i) => {
    assert.ok(back.subarray(r.targetOffset, r.targetOffset + size).equals(data.subarray(r.fileOffset, r.fileOffset + size)), `range ${i}`);
    assert.ok(back.subarray(r.targetOffset + size, r.targetOffset + 2 * size).every((b) => b === 0xa5), `gap after range ${i}`);
  });
  const route = res.record.routes['posix-device']!;
  return { copies: route.copies!, copyBatches: route.copyBatches! };
}

/**
 * `n` ranges of a little under 4 KiB from random places in a file, each into its own slot of a
 * GPU buffer at every other slot, in shuffled order: no two land next to each other, so each
 * needs a copy of its own. Every range and every gap between them is checked byte for byte.
 */
async function scattered(n: number): Promise<Seen> {
  configure({ threads: 4, bounceBufferSize: 256 * KiB });
  const { file, data } = makeFile(4 << 20);
  await using f = await open(file, 'r', { compatMode: 'on' });
  const slot = 4096;
  using dev = DeviceBuffer.alloc(2 * n * slot);
  let x = 7;
  const ranges = shuffled(n, 3).map((s, i) => {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    return { fileOffset: (x % 1000) * 4096 + (i % 7), size: 4096 - (i % 5), target: dev, targetOffset: 2 * s * slot };
  });
  const res = await readBatch(ranges, { file: f });
  assert.equal(res.errors.size, 0);
  const back = await dev.toBuffer();
  ranges.forEach((r, i) => {
    const got = back.subarray(r.targetOffset, r.targetOffset + r.size);
    assert.ok(got.equals(data.subarray(r.fileOffset, r.fileOffset + r.size)), `range ${i}`);
    assert.ok(back.subarray(r.targetOffset + r.size, r.targetOffset + 2 * slot).every((b) => b === 0xa5), `gap after range ${i}`);
  });
  const route = res.record.routes['posix-device']!;
  return { copyBatch: cudaStatus().copyBatch ?? null, ranges: route.ranges, copies: route.copies!, copyBatches: route.copyBatches!, fallback: res.record.fallbacks.find((f) => f.code === 'COPY_BATCH_UNAVAILABLE')?.code ?? null };
}

/** submitBatch's answer to a spec asking for batch copies (`copyBatch`), as an error code or 'ok'. */
async function askBatchCopies(copyBatch: unknown): Promise<string> {
  const { file } = makeFile(1 << 15);
  const fd = fs.openSync(file, 'r');
  try {
    const target = new Uint8Array(1 << 14);
    const plan = planBatch(columnsOf([{ file: 0, fileOffset: 0, size: 1 << 14, target: 0, targetOffset: 0, device: -1 }]), {
      threads: 2, hostReadMax: 1 << 20, deviceReadMax: () => 1 << 20, hostTargets: 1,
    });
    await native().submitBatch({
      fds: Int32Array.of(fd), reads: plan.reads, pieces: plan.pieces, tasks: plan.tasks, hostTargets: [target.buffer],
      deviceTargets: new BigUint64Array(0), deviceLengths: new Float64Array(0), deviceOrdinals: new Int32Array(0),
      pieceBytes: new Float64Array(plan.pieceRange.length), copyBatchMin: COPY_BATCH_MIN, copyBatchMax: 8, copyBatch,
    }).promise;
    return 'ok';
  } catch (err) {
    return (err as { record?: { code?: string } }).record?.code ?? String(err);
  } finally {
    fs.closeSync(fd);
  }
}

/** This file run again in a child on one build of the fake driver: what it saw there. */
function inChild(build: string): { many: Seen; few: Seen; asked: string; askedBadly: string } {
  const r = spawnSync(process.execPath, [fileURLToPath(import.meta.url)], {
    env: { ...process.env, PENSTOCK_TEST_DRIVER_VARIANT: build }, encoding: 'utf8', timeout: 60_000,
  });
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout.trim().split('\n').at(-1)!);
}

if (variant) {
  const many = await scattered(200);
  const few = await scattered(COPY_BATCH_MIN - 1);
  console.log(JSON.stringify({ many, few, asked: await askBatchCopies(true), askedBadly: await askBatchCopies('yes') }));
} else {
  describe('batched reads into ranges apart on the GPU', () => {
    test('each fill of staging goes in one batch call: byte-exact, a copy per range, no fallback', async () => {
      const seen = await scattered(200);
      assert.equal(seen.copyBatch, 'cuMemcpyBatchAsync_v2');
      assert.equal(seen.ranges, 200);
      assert.equal(seen.copies, 200, 'no two ranges share a copy');
      // 128 KiB halves hold 32 ranges: about 7 fills, each one batch call.
      assert.ok(seen.copyBatches >= 200 / 32 && seen.copyBatches <= 200 / COPY_BATCH_MIN, `${seen.copyBatches} batch calls`);
      assert.equal(seen.fallback, null);
    });

    test('ranges apart on two GPUs at once: the fills of each GPU in batch calls, every range byte-exact', async () => {
      configure({ threads: 3, bounceBufferSize: 256 * KiB });
      const { file, data } = makeFile(2 << 20);
      await using f = await open(file, 'r', { compatMode: 'on' });
      const n = 150;
      using d0 = DeviceBuffer.alloc(2 * n * 4096, { device: 0 });
      using d1 = DeviceBuffer.alloc(2 * n * 4096, { device: 1 });
      let x = 21;
      const ranges = shuffled(2 * n, 6).map((s, i) => {
        x = (Math.imul(x, 1103515245) + 12345) >>> 0;
        return { fileOffset: (x % 500) * 4096 + (i % 9), size: 4000, target: s % 2 ? d1 : d0, targetOffset: 2 * Math.floor(s / 2) * 4096 };
      });
      const res = await readBatch(ranges, { file: f });
      assert.equal(res.errors.size, 0);
      const back = [await d0.toBuffer(), await d1.toBuffer()];
      ranges.forEach((r, i) => {
        const b = back[r.target === d1 ? 1 : 0]!;
        assert.ok(b.subarray(r.targetOffset, r.targetOffset + 4000).equals(data.subarray(r.fileOffset, r.fileOffset + 4000)), `range ${i}`);
        assert.ok(b.subarray(r.targetOffset + 4000, r.targetOffset + 2 * 4096).every((v) => v === 0xa5), `gap after range ${i}`);
      });
      const route = res.record.routes['posix-device']!;
      assert.equal(route.copies, 2 * n);
      assert.ok(route.copyBatches! >= 2, `${route.copyBatches} batch calls`);
    });

    test('fewer copies than COPY_BATCH_MIN in a fill go a call each, and no fallback is claimed', async () => {
      const seen = await scattered(COPY_BATCH_MIN - 1);
      assert.deepEqual([seen.copies, seen.copyBatches, seen.fallback], [COPY_BATCH_MIN - 1, 0, null]);
    });

    test('a fill of more than COPY_BATCH_MAX copies goes in several batch calls, none longer than that', async () => {
      // 32-byte ranges: a task of 64 KiB holds 2048, and so does a fill of a 128 KiB half. The
      // fake refuses any call longer than COPY_BATCH_MAX.
      const seen = await withEnv({ FAKE_CUDA_COPY_BATCH_MAX: String(COPY_BATCH_MAX) }, () => tiny(12_000, 32));
      assert.equal(seen.copies, 12_000);
      assert.ok(seen.copyBatches >= Math.ceil(12_000 / COPY_BATCH_MAX), `${seen.copyBatches} batch calls`);
    });

    test('a copy of a batch call that fails rejects the batch with its CUDA error; the next batch works', async () => {
      await withEnv({ FAKE_CUDA_FAIL_COPY_AFTER: '37:copy-batch' }, async () => {
        await assert.rejects(scattered(200), { code: 'CUDA_ERROR_ILLEGAL_ADDRESS' });
      });
      assert.equal((await scattered(200)).copies, 200);
    });

    test('a driver with only the CUDA 12.8 form (failIdx) is used through it', () => {
      const r = inChild('copy-batch-v1');
      assert.equal(r.many.copyBatch, 'cuMemcpyBatchAsync');
      assert.equal(r.many.copies, 200);
      assert.ok(r.many.copyBatches > 0);
      assert.equal(r.many.fallback, null);
      assert.equal(r.asked, 'ok');
    });

    test('a driver without batch copies: a call per range, the record says why, and the addon refuses to be asked', () => {
      const r = inChild('no-copy-batch');
      assert.equal(r.many.copyBatch, null);
      assert.deepEqual([r.many.copies, r.many.copyBatches, r.many.fallback], [200, 0, 'COPY_BATCH_UNAVAILABLE']);
      assert.deepEqual([r.few.copyBatches, r.few.fallback], [0, null], 'too few copies to batch: nothing fell back');
      assert.equal(r.asked, 'ERR_PENSTOCK_INTERNAL');
      assert.equal(r.askedBadly, 'ERR_PENSTOCK_INVALID_ARGUMENT');
    });
  });
}
