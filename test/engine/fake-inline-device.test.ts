/**
 * Small device reads on the calling thread (the fake driver): a cached read of up to
 * `inlineReadMax` bytes goes from the page cache through the GPU's inline staging, in pieces
 * that spinning pool workers help read from 256 KiB up; anything that path cannot finish, or
 * that would wait behind the pool, goes to the pool.
 */
import { useFakeDriver, makeFile, withEnv } from '../helpers.js';
useFakeDriver({ FAKE_CUDA_DEVICE_COUNT: '2' });

import assert from 'node:assert/strict';
import { afterEach, describe, test } from 'node:test';
const { DeviceBuffer, configure, getConfig, open, prepareGpu, PenstockError } = await import('../../src/index.js');
const { INLINE_DEVICE_PIECE, INLINE_HELPED_PIECE, inlineDeviceSplit } = await import('../../src/plan/transfer-plan.js');
const { native } = await import('../../src/addon/binding.js');
const { poolSpinnerCount } = await import('../../src/addon/runtime.js');
const { prepareDevice } = await import('../../src/addon/gpu-preparation.js');
const fs = await import('node:fs');

const initial = getConfig();
/** The addon's own errors carry their record; the public API turns it into a PenstockError. */
const recordCode = (code: string) => (e: unknown) => (e as { record?: { code?: string } }).record?.code === code;
const INLINE_DEVICE_READ_MAX = initial.inlineReadMax;
/** The pieces pool workers read of an inline device read, where help was asked. */
const helpedPieces = (rec: { way: { kind: string; helpedPieces?: number } }) => (rec.way.kind === 'inline-device' ? rec.way.helpedPieces : undefined);
afterEach(() => configure(initial));
const KiB = 1024;

describe('small device reads on the calling thread', () => {
  test('a cached 4 KiB read lands byte-exact at its offset, recorded as an inline posix-device read', async () => {
    const { file, data } = makeFile(256 * KiB);
    await using f = await open(file);
    using dev = DeviceBuffer.alloc(8192);
    await dev.copyFrom(Buffer.alloc(8192, 0xee));
    const rec = await f.readRecorded(dev, { fileOffset: 12345, targetOffset: 100, size: 4096 });
    assert.deepEqual(rec.way, { kind: 'inline-device' }, 'read alone: no helpers asked');
    assert.deepEqual(rec.fallbacks, []);
    assert.equal(rec.route, 'posix-device');
    assert.equal(rec.device, 0);
    assert.equal(rec.bytes, 4096);
    const back = await dev.toBuffer();
    assert.ok(back.subarray(100, 4196).equals(data.subarray(12345, 12345 + 4096)));
    assert.ok(back.subarray(0, 100).every((b) => b === 0xee), 'before the range untouched');
    assert.ok(back.subarray(4196).every((b) => b === 0xee), 'after the range untouched');
    const routes = f.stats().routes['posix-device'];
    assert.equal(routes.operations, 1);
    assert.equal(routes.bytes, 4096);
  });

  test('helped reads into two GPUs in turn: each through its own staging, byte-exact, recorded on its GPU', async () => {
    const size = INLINE_DEVICE_READ_MAX;
    const { file, data } = makeFile(size + 8 * KiB);
    await using f = await open(file, 'r', { compatMode: 'on' });
    using d0 = DeviceBuffer.alloc(size, { device: 0 });
    using d1 = DeviceBuffer.alloc(size, { device: 1 });
    for (let i = 0; i < 6; i++) {
      const dev = i % 2 ? d1 : d0;
      const at = (i * 1357) % (8 * KiB);
      const rec = await f.readRecorded(dev, { fileOffset: at, size });
      assert.deepEqual([rec.way.kind, rec.device, rec.bytes, typeof helpedPieces(rec)], ['inline-device', i % 2, size, 'number'], `read ${i}`);
      assert.ok((await dev.toBuffer()).equals(data.subarray(at, at + size)), `read ${i} into GPU ${i % 2}`);
    }
  });

  test('every size up to the limit is inline on the staged route; one byte more goes to the pool', async () => {
    const { file, data } = makeFile(INLINE_DEVICE_READ_MAX * 2);
    // Staged: where cuFile works (the fake's does), reads from gdsThreshold up go to cuFile.
    await using f = await open(file, 'r', { compatMode: 'on' });
    using dev = DeviceBuffer.alloc(INLINE_DEVICE_READ_MAX + 1);
    // Several pieces, and a last piece of one byte, copied while the next piece is read.
    for (const size of [1, 4095, 4096, 65535, INLINE_DEVICE_PIECE + 1, 3 * INLINE_DEVICE_PIECE + 5, INLINE_DEVICE_READ_MAX]) {
      const rec = await f.readRecorded(dev, { fileOffset: 7, size });
      assert.equal(rec.way.kind, 'inline-device', `${size}`);
      assert.ok((await dev.subarray(0, size).toBuffer()).equals(data.subarray(7, 7 + size)), `${size}`);
    }
    const rec = await f.readRecorded(dev, { fileOffset: 3 });
    assert.equal(rec.way.kind, 'staged');
    assert.equal(rec.route, 'posix-device');
    assert.ok((await dev.toBuffer()).equals(data.subarray(3, 3 + INLINE_DEVICE_READ_MAX + 1)));
  });

  test('where cuFile takes the read, it is not done inline', async () => {
    // cuFile's driver opens in the background: a read started meanwhile would be staged.
    await prepareGpu(0);
    const { file, data } = makeFile(64 * KiB);
    await using f = await open(file);
    using dev = DeviceBuffer.alloc(32 * KiB);
    const rec = await f.readRecorded(dev);
    assert.equal(rec.route, 'gds', 'the fake cuFile counts its reads as direct');
    assert.deepEqual(rec.way, { kind: 'cufile' });
    assert.ok((await dev.toBuffer()).equals(data.subarray(0, 32 * KiB)));
  });

  test('while another read is in flight, a small read goes to the pool and both are byte-exact', async () => {
    const { file, data } = makeFile(8 << 20);
    await using f = await open(file);
    using big = DeviceBuffer.alloc(8 << 20);
    using small = DeviceBuffer.alloc(4096);
    const first = f.readRecorded(big);
    const second = await f.readRecorded(small, { fileOffset: 4096 });
    assert.notEqual(second.way.kind, 'inline-device', 'the copy would wait behind the pool on the JS thread');
    await first;
    assert.ok((await small.toBuffer()).equals(data.subarray(4096, 8192)));
    assert.ok((await big.toBuffer()).equals(data));
  });

  test('a read reaching end of file, and O_DIRECT reads, go to the pool', async () => {
    const { file, data } = makeFile(5000);
    await using f = await open(file);
    using dev = DeviceBuffer.alloc(4096);
    await dev.copyFrom(Buffer.alloc(4096, 0xee));
    const rec = await f.readRecorded(dev, { fileOffset: 4000 });
    assert.deepEqual(rec.way, { kind: 'staged', variant: 'bounce' });
    assert.equal(rec.bytes, 1000);
    const back = await dev.toBuffer();
    assert.ok(back.subarray(0, 1000).equals(data.subarray(4000)));
    assert.ok(back.subarray(1000).every((b) => b === 0xee), 'past end of file untouched');
    configure({ directIoRead: true });
    const direct = await f.readRecorded(dev, { fileOffset: 0 });
    assert.equal(direct.way.kind, 'staged');
    assert.ok((await dev.toBuffer()).equals(data.subarray(0, 4096)));
  });

  test('end of file in a later piece: the pool reads it all, nothing past the end is touched', async () => {
    const fileSize = INLINE_DEVICE_PIECE + 4096 * 11 + 7;
    const { file, data } = makeFile(fileSize);
    await using f = await open(file, 'r', { compatMode: 'on' });
    using dev = DeviceBuffer.alloc(2 * INLINE_DEVICE_PIECE);
    await dev.copyFrom(Buffer.alloc(dev.byteLength, 0xee));
    const rec = await f.readRecorded(dev);
    assert.equal(rec.way.kind, 'staged');
    assert.equal(rec.bytes, fileSize);
    const back = await dev.toBuffer();
    assert.ok(back.subarray(0, fileSize).equals(data));
    assert.ok(back.subarray(fileSize).every((b) => b === 0xee), 'past end of file untouched');
  });

  test('a failed copy of a later piece is a typed CUDA error after every copy is waited for', async () => {
    // Straight through the addon, without helpers: four pieces, so four copies, the third failing.
    const { file, data } = makeFile(4 * INLINE_DEVICE_PIECE);
    using dev = DeviceBuffer.alloc(4 * INLINE_DEVICE_PIECE);
    prepareDevice(0);
    const fd = fs.openSync(file, 'r');
    try {
      const report = new Uint32Array(1);
      await withEnv({ FAKE_CUDA_FAIL_COPY_AFTER: '2:inline-piece' }, async () => {
        assert.throws(() => native().readCachedToDevice(fd, 0, dev.ptr, dev.byteLength, 0, INLINE_DEVICE_PIECE, 0, false, report), recordCode('CUDA_ERROR_ILLEGAL_ADDRESS'));
      });
      assert.equal(report[0], 0, 'no helpers asked, none read');
      // The staging is free again: the same call now moves every byte.
      assert.equal(native().readCachedToDevice(fd, 0, dev.ptr, dev.byteLength, 0, INLINE_DEVICE_PIECE, 0, false, report), dev.byteLength);
      assert.ok((await dev.toBuffer()).equals(data));
    } finally {
      fs.closeSync(fd);
    }
  });

  test('with helpers, a failed copy is a typed CUDA error once every piece and copy is done, and the next read works', async () => {
    const size = 16 * INLINE_HELPED_PIECE;
    const { file, data } = makeFile(size);
    using dev = DeviceBuffer.alloc(size);
    prepareDevice(0);
    const fd = fs.openSync(file, 'r');
    try {
      const report = new Uint32Array(1);
      const read = () => native().readCachedToDevice(fd, 0, dev.ptr, size, 0, INLINE_HELPED_PIECE, 3, true, report);
      await withEnv({ FAKE_CUDA_FAIL_COPY_AFTER: '0:inline-helped' }, async () => {
        assert.throws(read, recordCode('CUDA_ERROR_ILLEGAL_ADDRESS'));
      });
      assert.equal(read(), size);
      assert.ok((await dev.toBuffer()).equals(data));
    } finally {
      fs.closeSync(fd);
    }
  });

  test('pool workers asked to help read pieces do read some: byte-exact, and the report says how many', async () => {
    configure({ threads: 4 });
    const size = INLINE_DEVICE_READ_MAX;
    const piece = INLINE_HELPED_PIECE;
    const pieces = Math.ceil(size / piece);
    const { file, data } = makeFile(size + 3 * piece);
    using dev = DeviceBuffer.alloc(size + 2 * 4096);
    prepareDevice(0);
    const fd = fs.openSync(file, 'r');
    try {
      const report = new Uint32Array(1);
      const helped: number[] = [];
      // Whether a worker comes in time for a piece depends on the scheduler: read until one has.
      for (let i = 0; i < 400 && !helped.some((n) => n > 0); i++) {
        await dev.copyFrom(Buffer.alloc(dev.byteLength, 0xee));
        const fileOffset = (i % 3) * piece + (i % 2) * 4095;
        const scratch = i % 2 === 0;
        assert.equal(native().readCachedToDevice(fd, 0, dev.ptr + 4096n, size, fileOffset, piece, 3, scratch, report), size);
        assert.ok(report[0]! <= pieces, `${report[0]} of ${pieces} pieces`);
        helped.push(report[0]!);
        const back = await dev.toBuffer();
        assert.ok(back.subarray(4096, 4096 + size).equals(data.subarray(fileOffset, fileOffset + size)), `read ${i}`);
        assert.ok(back.subarray(0, 4096).every((b) => b === 0xee) && back.subarray(4096 + size).every((b) => b === 0xee), 'around the range untouched');
      }
      assert.ok(helped.some((n) => n > 0), `helpers read no piece in ${helped.length} reads`);
    } finally {
      fs.closeSync(fd);
    }
    // The public read asks for help as planned, and its record says how many pieces helpers read;
    // a read too small to share asks for none, and its record has no helpedPieces.
    assert.ok(inlineDeviceSplit(size, poolSpinnerCount()).helpers > 0);
    await using f = await open(file, 'r', { compatMode: 'on' });
    await dev.copyFrom(Buffer.alloc(dev.byteLength, 0xee));
    const rec = await f.readRecorded(dev, { size, fileOffset: piece });
    const helped = helpedPieces(rec);
    assert.ok(typeof helped === 'number' && helped <= pieces, `helpedPieces ${helped}`);
    const back = await dev.toBuffer();
    assert.ok(back.subarray(0, size).equals(data.subarray(piece, piece + size)));
    assert.ok(back.subarray(size).every((b) => b === 0xee));
    const small = await f.readRecorded(dev, { size: INLINE_DEVICE_PIECE - 1 });
    assert.deepEqual(small.way, { kind: 'inline-device' });
    assert.ok((await dev.toBuffer()).subarray(0, INLINE_DEVICE_PIECE - 1).equals(data.subarray(0, INLINE_DEVICE_PIECE - 1)));
  });

  test('through scratch, with and without helpers, every piece lands byte-exact and nothing around it is touched', async () => {
    const { file, data } = makeFile(INLINE_DEVICE_READ_MAX + 8192);
    using dev = DeviceBuffer.alloc(INLINE_DEVICE_READ_MAX + 8192);
    prepareDevice(0);
    const fd = fs.openSync(file, 'r');
    try {
      const report = new Uint32Array(1);
      for (const [size, piece, helpers] of [[INLINE_DEVICE_READ_MAX, 64 * KiB, 3], [300 * KiB + 5, 64 * KiB, 0], [777, 256, 2], [INLINE_DEVICE_READ_MAX, 256 * KiB, 1]] as const) {
        await dev.copyFrom(Buffer.alloc(dev.byteLength, 0xee));
        const fileOffset = 4095;
        assert.equal(native().readCachedToDevice(fd, 0, dev.ptr + 4096n, size, fileOffset, piece, helpers, true, report), size, `${size}`);
        assert.ok(report[0]! <= Math.ceil(size / piece));
        if (helpers === 0) assert.equal(report[0], 0);
        const back = await dev.toBuffer();
        assert.ok(back.subarray(4096, 4096 + size).equals(data.subarray(fileOffset, fileOffset + size)), `${size} in pieces of ${piece}`);
        assert.ok(back.subarray(0, 4096).every((b) => b === 0xee) && back.subarray(4096 + size).every((b) => b === 0xee), 'around the range untouched');
      }
    } finally {
      fs.closeSync(fd);
    }
  });

  test('the addon refuses helpers out of range, a report that is not a Uint32Array, and more than 1024 pieces', async () => {
    const { file } = makeFile(64 * KiB);
    using dev = DeviceBuffer.alloc(64 * KiB);
    prepareDevice(0);
    const fd = fs.openSync(file, 'r');
    try {
      const call = (piece: number, helpers: number, report: unknown, scratch: unknown = false, size = 64 * KiB) =>
        native().readCachedToDevice(fd, 0, dev.ptr, size, 0, piece, helpers, scratch as boolean, report as Uint32Array);
      const bad = recordCode('ERR_PENSTOCK_INVALID_ARGUMENT');
      assert.throws(() => call(4096, -1, new Uint32Array(1)), bad);
      assert.throws(() => call(4096, 65, new Uint32Array(1)), bad);
      assert.throws(() => call(4096, 1.5, new Uint32Array(1)), bad);
      assert.throws(() => call(4096, 1, new Int32Array(1)), bad);
      assert.throws(() => call(4096, 1, new Uint32Array(0)), bad);
      assert.throws(() => call(4096, 1, [0]), bad);
      assert.throws(() => call(63, 1, new Uint32Array(1)), bad, '1041 pieces');
      assert.throws(() => call(4096, 1, new Uint32Array(1), 1), bad, 'scratch is a boolean');
      assert.equal(call(64, 2, new Uint32Array(1)), 64 * KiB, '1024 pieces of 64 bytes');
    } finally {
      fs.closeSync(fd);
    }
  });

  test('a failed copy is a typed CUDA error, and the next read works', async () => {
    const { file, data } = makeFile(64 * KiB);
    await using f = await open(file);
    using dev = DeviceBuffer.alloc(4096);
    await withEnv({ FAKE_CUDA_FAIL_COPY_AFTER: '0:inline' }, async () => {
      await assert.rejects(f.read(dev, { fileOffset: 0 }), (e: unknown) => {
        assert.ok(e instanceof PenstockError);
        assert.equal((e as { code: string }).code, 'CUDA_ERROR_ILLEGAL_ADDRESS');
        return true;
      });
    });
    const rec = await f.readRecorded(dev, { fileOffset: 8192 });
    assert.equal(rec.way.kind, 'inline-device');
    assert.ok((await dev.toBuffer()).equals(data.subarray(8192, 12288)));
  });

  test('a freed buffer is refused before anything is read', async () => {
    const { file } = makeFile(64 * KiB);
    await using f = await open(file);
    const dev = DeviceBuffer.alloc(4096);
    dev.free();
    await assert.rejects(f.read(dev), { code: 'ERR_PENSTOCK_FREED' });
  });
});
