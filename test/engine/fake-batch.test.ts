/**
 * Batched reads into GPU memory through the fake driver (device memory is host memory; copies
 * are asynchronous): gathered into staging, copied in few copies, byte-exact for every range.
 */
import { useFakeDriver, makeFile } from '../helpers.js';
useFakeDriver({ FAKE_CUDA_DEVICE_COUNT: '2', FAKE_CUDA_ASYNC_DELAY_US: '20' });

import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
const { DeviceBuffer, configure, getConfig, open } = await import('../../src/index.js');
const { readBatch } = await import('../../src/batch.js');
const { readBatchInParts } = await import('../../src/engine/batch/batch-read.js');

const initial = getConfig();
after(() => configure(initial));
const KiB = 1024;

describe('readBatch into GPU memory', () => {
  test('random 4 KiB ranges into one buffer: byte-exact, a few copies, untouched elsewhere', async () => {
    configure({ threads: 4, bounceBufferSize: 256 * KiB });
    const { file, data } = makeFile(8 << 20);
    await using f = await open(file, 'r', { compatMode: 'on' });
    const n = 500;
    using dev = DeviceBuffer.alloc(n * 4096 + 4096);
    let x = 99;
    const ranges = Array.from({ length: n }, (_, i) => {
      x = (Math.imul(x, 1103515245) + 12345) >>> 0;
      return { fileOffset: (x % 2048) * 4096 + (i % 3), size: 4096, target: dev, targetOffset: i * 4096 };
    });
    const res = await readBatch(ranges, { file: f });
    assert.equal(res.errors.size, 0);
    assert.equal(res.totalBytes, n * 4096);
    const back = await dev.toBuffer();
    ranges.forEach((r, i) => assert.ok(back.subarray(i * 4096, (i + 1) * 4096).equals(data.subarray(r.fileOffset, r.fileOffset + 4096)), `range ${i}`));
    assert.ok(back.subarray(n * 4096).every((b) => b === 0xa5), 'past the ranges untouched');
    const route = res.record.routes['posix-device']!;
    assert.equal(route.ranges, n);
    assert.equal(route.bytes, n * 4096);
    // One pread per range, staged in target order: a copy per staging half (or task), not per range.
    assert.ok(route.copies! < n / 8, `${route.copies} copies`);
    assert.equal(route.copyBatches, 0, 'a copy per fill: nothing to batch');
    // Each half's preads went through the worker's ring together, where io_uring can be had.
    const codes = res.record.fallbacks.map((f) => f.code);
    if (codes.length) assert.deepEqual(codes, ['IO_URING_UNAVAILABLE'], 'a copy per fill: no batch call to miss');
    else assert.ok(res.record.ringReads > n / 2, `${res.record.ringReads} of ${route.ops} through io_uring`);
  });

  test('ranges longer than a staging half, into two GPUs and host memory at once, up to end of file', async () => {
    configure({ threads: 3, bounceBufferSize: 64 * KiB });
    const { file, data } = makeFile(1 << 20);
    await using f = await open(file, 'r', { compatMode: 'on' });
    using d0 = DeviceBuffer.alloc(600 * KiB, { device: 0 });
    using d1 = DeviceBuffer.alloc(300 * KiB, { device: 1 });
    const host = Buffer.alloc(100 * KiB, 0xee);
    const res = await readBatch([
      { fileOffset: 3, size: 500 * KiB, target: d0, targetOffset: 7 },
      { fileOffset: 700 * KiB, size: 200 * KiB, target: d1 },
      { fileOffset: 1000 * KiB, size: 100 * KiB, target: d1, targetOffset: 200 * KiB },
      { fileOffset: 5, size: 100 * KiB, target: host },
    ], { file: f });
    assert.equal(res.errors.size, 0);
    assert.deepEqual([...res.bytes], [500 * KiB, 200 * KiB, 24 * KiB, 100 * KiB]);
    assert.ok((await d0.subarray(7, 7 + 500 * KiB).toBuffer()).equals(data.subarray(3, 3 + 500 * KiB)));
    assert.ok((await d1.subarray(0, 200 * KiB).toBuffer()).equals(data.subarray(700 * KiB, 900 * KiB)));
    const tail = await d1.subarray(200 * KiB).toBuffer();
    assert.ok(tail.subarray(0, 24 * KiB).equals(data.subarray(1000 * KiB)));
    assert.ok(tail.subarray(24 * KiB).every((b) => b === 0xa5), 'past end of file untouched on the GPU');
    assert.ok(host.equals(data.subarray(5, 5 + 100 * KiB)));
    assert.ok(res.record.routes['posix-device']!.ops >= 500 / 32, 'long ranges cut to the 32 KiB halves');
    assert.equal(res.record.routes['posix-host']!.ranges, 1);
  });

  test('errors per range into the GPU; a failing copy rejects the batch', async () => {
    configure({ threads: 2, bounceBufferSize: 64 * KiB });
    const { file, data } = makeFile(64 * KiB);
    await using good = await open(file, 'r', { compatMode: 'on' });
    await using bad = await open('/proc/self/mem', 'r', { compatMode: 'on' });
    using dev = DeviceBuffer.alloc(3 * 4096);
    const res = await readBatch([
      { file: good, fileOffset: 4096, size: 4096, target: dev },
      { file: bad, fileOffset: 0, size: 4096, target: dev, targetOffset: 4096 },
      { file: good, fileOffset: 0, size: 4096, target: dev, targetOffset: 8192 },
    ]);
    assert.deepEqual([...res.errors.keys()], [1]);
    assert.equal((res.errors.get(1) as Error & { code: string }).code, 'EIO');
    const back = await dev.toBuffer();
    assert.ok(back.subarray(0, 4096).equals(data.subarray(4096, 8192)));
    assert.ok(back.subarray(4096, 8192).every((b) => b === 0xa5));
    assert.ok(back.subarray(8192).equals(data.subarray(0, 4096)));
    process.env.FAKE_CUDA_FAIL_COPY_AFTER = '0:batch';
    try {
      await assert.rejects(readBatch([{ file: good, fileOffset: 0, size: 4096, target: dev }]), { code: 'CUDA_ERROR_ILLEGAL_ADDRESS' });
    } finally {
      delete process.env.FAKE_CUDA_FAIL_COPY_AFTER;
    }
    assert.equal((await readBatch([{ file: good, fileOffset: 0, size: 4096, target: dev }])).totalBytes, 4096, 'works again afterwards');
  });

  test('a batch in parts: byte-exact; a copy failing in one part rejects once every part has settled', async () => {
    configure({ threads: 3, bounceBufferSize: 64 * KiB });
    const { file, data } = makeFile(4 << 20);
    await using f = await open(file, 'r', { compatMode: 'on' });
    const n = 400;
    using dev = DeviceBuffer.alloc(n * 4096);
    let x = 7;
    const ranges = Array.from({ length: n }, (_, i) => {
      x = (Math.imul(x, 1103515245) + 12345) >>> 0;
      return { fileOffset: (x % 1000) * 4096 + (i % 5), size: 4096 - (i % 2) * 100, target: dev, targetOffset: i * 4096 };
    });
    const res = await readBatchInParts(ranges, { file: f }, 25);
    assert.equal(res.record.parts, 5, 'parts of 25, 50, 100, 200 and the last 25 pieces');
    assert.equal(res.errors.size, 0);
    const back = await dev.toBuffer();
    ranges.forEach((r, i) => assert.ok(back.subarray(i * 4096, i * 4096 + r.size).equals(data.subarray(r.fileOffset, r.fileOffset + r.size)), `range ${i}`));
    assert.equal(res.record.routes['posix-device']!.bytes, ranges.reduce((a, r) => a + r.size, 0));
    process.env.FAKE_CUDA_FAIL_COPY_AFTER = '5:batch';
    try {
      await assert.rejects(readBatchInParts(ranges, { file: f }, 25), { code: 'CUDA_ERROR_ILLEGAL_ADDRESS' });
    } finally {
      delete process.env.FAKE_CUDA_FAIL_COPY_AFTER;
    }
    // Every part had settled before the rejection: the memory is the caller's again at once.
    const snapshot = await dev.toBuffer();
    await new Promise((r) => setTimeout(r, 50));
    assert.ok((await dev.toBuffer()).equals(snapshot), 'nothing written after the rejection');
  });

  test('abort rejects, and a buffer in use cannot be freed until the batch settles', async () => {
    configure({ threads: 2, bounceBufferSize: 64 * KiB });
    const { file } = makeFile(1 << 20);
    await using f = await open(file, 'r', { compatMode: 'on' });
    const dev = DeviceBuffer.alloc(1 << 20);
    const ranges = Array.from({ length: 256 }, (_, i) => ({ fileOffset: i * 4096, size: 4096, target: dev.subarray(i * 4096, (i + 1) * 4096) }));
    const ac = new AbortController();
    const p = readBatch(ranges, { file: f, signal: ac.signal });
    assert.throws(() => dev.free(), { code: 'ERR_PENSTOCK_BUFFER_BUSY' });
    ac.abort();
    await assert.rejects(p, { name: 'AbortError' });
    dev.free();
    await assert.rejects(readBatch(ranges, { file: f }), { code: 'ERR_PENSTOCK_FREED' });
  });

  test('staged reads and batches on the same workers do not disturb each other', async () => {
    configure({ threads: 2, bounceBufferSize: 64 * KiB });
    const { file, data } = makeFile(2 << 20);
    await using f = await open(file, 'r', { compatMode: 'on' });
    using big = DeviceBuffer.alloc(2 << 20);
    using small = DeviceBuffer.alloc(64 * 4096);
    const ranges = Array.from({ length: 64 }, (_, i) => ({ fileOffset: (i * 7919 * 4096) % (2 << 20), size: 4096, target: small, targetOffset: i * 4096 }));
    const [n, res] = await Promise.all([f.read(big), readBatch(ranges, { file: f })]);
    assert.equal(n, 2 << 20);
    assert.ok((await big.toBuffer()).equals(data));
    assert.equal(res.totalBytes, 64 * 4096);
    const back = await small.toBuffer();
    ranges.forEach((r, i) => assert.ok(back.subarray(i * 4096, (i + 1) * 4096).equals(data.subarray(r.fileOffset, r.fileOffset + 4096)), `range ${i}`));
  });
});
