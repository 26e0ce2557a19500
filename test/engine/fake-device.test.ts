/**
 * Device logic against the fake driver (device memory is host memory, async copies really are
 * asynchronous): the runtime, device and pinned buffers, the staged path. (The cuFile path and
 * several GPUs are in fake-device-cufile.test.ts.)
 */
import { useFakeDriver, withEnv, makeFile, newPath, pattern, sha256 } from '../helpers.js';
useFakeDriver({ FAKE_CUDA_DEVICE_COUNT: '2' });

import assert from 'node:assert/strict';
import fs from 'node:fs';
import { afterEach, describe, test } from 'node:test';
const p = await import('../../src/index.js');
const { DeviceBuffer, PinnedBuffer, configure, getConfig, open, readFileToDevice, writeFile } = p;
const { stats, resetStats } = await import('../../src/measure.js');
const { runtimeInfo } = await import('../../src/doctor.js');

const initial = getConfig();
// Every test starts from the same settings, whether the one before it passed or threw.
afterEach(() => configure(initial));

async function deviceBytes(buf: import('../../src/index.js').DeviceBuffer): Promise<Buffer> {
  return buf.toBuffer();
}

describe('runtime', () => {
  test('the fake driver is loaded and reports two GPUs; cuFile is opened once a GPU is prepared', async () => {
    assert.deepEqual(runtimeInfo().cufileOpen, { open: 'background' });
    await p.prepareGpu(0);
    const rt = runtimeInfo();
    assert.equal(rt.cuda.initialized, true);
    assert.equal(rt.cuda.deviceCount, 2);
    assert.equal(rt.cufile.loaded, true);
    assert.equal(rt.cufile.driverOpen, true);
    assert.equal(rt.cufile.version, 1150);
    assert.equal(rt.cufile.statsLevel, 3);
    assert.equal(rt.cufile.props?.nvfsMajor, 2);
    assert.equal(p.deviceCount(), 2);
    assert.equal(p.deviceInfo(1).name, 'Fake GPU 1');
    assert.match(p.deviceInfo(1).pciBusId, /^0000:11:00\.0$/);
  });
});

describe('bounce buffers', () => {
  test("'auto' shares 256 MiB over threads × GPUs, between 2 and 8 MiB", () => {
    const sizes = [4, 32, 64, 200].map((threads) => {
      configure({ threads, bounceBufferSize: 'auto' });
      return runtimeInfo().bounceBufferSize;
    });
    assert.deepEqual(sizes, [8 << 20, 4 << 20, 2 << 20, 2 << 20]);
    configure({ bounceBufferSize: 1 << 20 });
    assert.equal(runtimeInfo().bounceBufferSize, 1 << 20);
    configure(initial);
  });
});

describe('DeviceBuffer', () => {
  test('alloc, copy in and out, sub-range views, free', async () => {
    const buf = DeviceBuffer.alloc(10000);
    assert.equal(buf.byteLength, 10000);
    assert.equal(buf.device, 0);
    assert.equal(typeof buf.ptr, 'bigint');
    const data = pattern(10000, 5);
    await buf.copyFrom(data);
    assert.ok((await deviceBytes(buf)).equals(data));
    const view = buf.subarray(100, 300);
    assert.equal(view.byteLength, 200);
    assert.equal(view.ptr, buf.ptr + 100n);
    assert.ok((await view.toBuffer()).equals(data.subarray(100, 300)));
    await view.copyFrom(Buffer.alloc(50, 1), { offset: 10 });
    const out = new Uint8Array(60);
    await buf.copyTo(out, { offset: 105 });
    assert.deepEqual([...out.subarray(0, 5)], [...data.subarray(105, 110)]);
    assert.ok(out.subarray(5, 55).every((x) => x === 1));
    buf.free();
    buf.free();
    assert.equal(view.freed, true);
    assert.throws(() => view.ptr, { code: 'ERR_PENSTOCK_FREED' });
    await assert.rejects(buf.copyFrom(data), { code: 'ERR_PENSTOCK_FREED' });
  });

  test('bad input: ranges, devices, foreign pointers', async () => {
    using buf = DeviceBuffer.alloc(100);
    await assert.rejects(buf.copyFrom(Buffer.alloc(101)), { code: 'ERR_PENSTOCK_OUT_OF_RANGE' });
    await assert.rejects(buf.copyFrom(Buffer.alloc(10), { offset: 95 }), { code: 'ERR_PENSTOCK_OUT_OF_RANGE' });
    await assert.rejects(buf.copyTo(Buffer.alloc(10), { offset: 95, size: 10 }), { code: 'ERR_PENSTOCK_OUT_OF_RANGE' });
    assert.throws(() => buf.subarray(50, 20), { code: 'ERR_PENSTOCK_OUT_OF_RANGE' });
    assert.throws(() => buf.subarray(0, 101), { code: 'ERR_PENSTOCK_OUT_OF_RANGE' });
    assert.throws(() => DeviceBuffer.alloc(-1), { code: 'ERR_PENSTOCK_INVALID_ARGUMENT' });
    assert.throws(() => DeviceBuffer.alloc(10, { device: 2 }), { code: 'ERR_PENSTOCK_INVALID_DEVICE' });
    assert.throws(() => DeviceBuffer.alloc(10, { device: -1 }), { code: 'ERR_PENSTOCK_INVALID_DEVICE' });
    assert.throws(() => DeviceBuffer.alloc(17 * 2 ** 30), { code: 'CUDA_ERROR_OUT_OF_MEMORY', name: 'CudaError' });
    assert.throws(() => DeviceBuffer.wrap(12345n, 10), { code: 'ERR_PENSTOCK_NOT_DEVICE_MEMORY' });
    assert.throws(() => DeviceBuffer.wrap(-1n, 10), { code: 'ERR_PENSTOCK_INVALID_ARGUMENT' });
    assert.throws(() => DeviceBuffer.wrap(buf.ptr + 50n, 51), { code: 'ERR_PENSTOCK_OUT_OF_RANGE' });
    assert.throws(() => DeviceBuffer.wrap(buf.ptr, 10, { device: 1 }), { code: 'ERR_PENSTOCK_INVALID_DEVICE' });
    const z = DeviceBuffer.alloc(0);
    assert.equal(z.byteLength, 0);
    z.free();
  });

  test('wrap borrows foreign memory, resolving its GPU from the pointer', async () => {
    using owner = DeviceBuffer.alloc(4096, { device: 1 });
    await owner.copyFrom(pattern(4096, 2));
    const w = DeviceBuffer.wrap(owner.ptr + 96n, 4000);
    assert.equal(w.device, 1);
    assert.equal(w.owned, false);
    assert.ok((await w.toBuffer()).equals(pattern(4096, 2).subarray(96)));
    w.free();
    assert.ok((await owner.toBuffer()).equals(pattern(4096, 2)), 'freeing a wrapper leaves the memory alone');
  });

  test('free refuses while an operation uses the buffer', async () => {
    const { file } = makeFile(8 << 20);
    await using f = await open(file, 'r', { compatMode: 'on' });
    const buf = DeviceBuffer.alloc(8 << 20);
    const pending = f.read(buf);
    assert.throws(() => buf.free(), { code: 'ERR_PENSTOCK_BUFFER_BUSY' });
    await pending;
    buf.free();
  });
});

describe('PinnedBuffer', () => {
  test('is a real ArrayBuffer, counts pinned bytes, and detaches on free', async () => {
    const before = runtimeInfo().pinnedBytes;
    const pb = PinnedBuffer.alloc(1 << 20);
    assert.equal(runtimeInfo().pinnedBytes, before + (1 << 20));
    assert.ok(pb.buffer instanceof ArrayBuffer);
    pb.bytes.fill(3);
    const { file, data } = makeFile(1 << 20);
    await using f = await open(file);
    assert.equal(await f.read(pb), 1 << 20);
    assert.ok(Buffer.from(pb.buffer).equals(data));
    using dev = DeviceBuffer.alloc(1 << 20);
    await dev.copyFrom(pb);
    assert.ok((await dev.toBuffer()).equals(data));
    const view = pb.bytes;
    // No read on the calling thread, so this one is in flight on the pool (afterEach restores).
    configure({ inlineReadMax: 0 });
    const pending = f.read(view.subarray(10, 200_010));
    assert.throws(() => pb.free(), { code: 'ERR_PENSTOCK_BUFFER_BUSY' });
    await pending;
    pb.free();
    pb.free();
    assert.equal(view.byteLength, 0, 'views of freed pinned memory are empty');
    assert.equal(runtimeInfo().pinnedBytes, before);
    await assert.rejects(f.read(pb), { code: 'ERR_PENSTOCK_FREED' });
    assert.throws(() => PinnedBuffer.alloc(0), { code: 'ERR_PENSTOCK_INVALID_SIZE' });
  });
});

describe('staged path (posix-device)', () => {
  const FILE_SIZE = 9 * (1 << 20) + 4099;
  for (const [taskSize, bounce, threads] of [
    [4096, 64 * 1024, 1],
    [64 * 1024, 64 * 1024, 3],
    [1 << 20, 256 * 1024, 4],
    [4 << 20, 4 << 20, 8],
  ] as const) {
    test(`reads match byte for byte (task ${taskSize}, bounce ${bounce}, threads ${threads})`, async () => {
      configure({ taskSize, bounceBufferSize: bounce, threads });
      const { file, data } = makeFile(FILE_SIZE);
      await using f = await open(file, 'r', { compatMode: 'on' });
      using buf = DeviceBuffer.alloc(FILE_SIZE + 8192);
      for (const [off, size] of [[0, FILE_SIZE], [1, 1], [4095, 70000], [12345, 5 << 20], [FILE_SIZE - 10, 5000], [FILE_SIZE + 5, 10], [0, 0]] as const) {
        await buf.copyFrom(Buffer.alloc(buf.byteLength, 0xc3));
        const n = await f.read(buf, { fileOffset: off, targetOffset: 7, size });
        const expect = Math.max(0, Math.min(size, FILE_SIZE - off));
        assert.equal(n, expect, `count at ${off}+${size}`);
        const back = await buf.toBuffer();
        assert.ok(back.subarray(7, 7 + n).equals(data.subarray(off, off + n)), `data at ${off}+${size}`);
        assert.ok(back.subarray(0, 7).every((x) => x === 0xc3), 'before untouched');
        assert.ok(back.subarray(7 + n).every((x) => x === 0xc3), 'after untouched');
      }
      assert.equal(f.route.device, 'posix-device');
      assert.equal(f.route.reason?.code, 'COMPAT_MODE_ON');
    });
  }

  test('staged reads through scratch and streaming stores match byte for byte, to the end of the file', async () => {
    const { native } = await import('../../src/addon/binding.js');
    const { bounceBytes, ensurePool } = await import('../../src/addon/runtime.js');
    configure({ taskSize: 1 << 20, bounceBufferSize: 256 * 1024, threads: 3 });
    const size = 3 * (1 << 20) + 12345;
    const { file, data } = makeFile(size);
    using buf = DeviceBuffer.alloc(size + 8192);
    ensurePool();
    const fd = fs.openSync(file, 'r');
    try {
      // Scratch pieces smaller than, equal to and not dividing a bounce half; reads that end past
      // the end of the file stop there.
      for (const [stageScratch, fileOffset, want] of [[0, 0, size], [64 * 1024, 0, size], [100_000, 5, size - 5], [4096, size - 70_000, 70_000 + 8192]] as const) {
        await buf.copyFrom(Buffer.alloc(buf.byteLength, 0x5a));
        const r = await native().submit({
          route: 'posix-device', write: false, fd, directFd: -1, fileOffset, size: want, taskSize: 256 * 1024, maxRunners: 0, writePiece: 0,
          devicePtr: buf.ptr, device: buf.device, stagePiece: bounceBytes() / 2, mapped: false, mappedPiece: 0, mappedClaimDivisor: 0, stageScratch,
        }).promise;
        const got = Math.min(want, size - fileOffset);
        assert.equal(r.bytes, got, `bytes with scratch ${stageScratch}`);
        const back = await buf.toBuffer();
        assert.ok(back.subarray(0, got).equals(data.subarray(fileOffset, fileOffset + got)), `data with scratch ${stageScratch}`);
        assert.ok(back.subarray(got).every((b) => b === 0x5a), `past the end untouched with scratch ${stageScratch}`);
      }
    } finally {
      fs.closeSync(fd);
    }
  });

  test('writes from device memory match byte for byte', async () => {
    for (const [taskSize, bounce] of [[4096, 64 * 1024], [1 << 20, 128 * 1024], [4 << 20, 4 << 20]] as const) {
      configure({ taskSize, bounceBufferSize: bounce, threads: 4 });
      const data = pattern(7 * (1 << 20) + 333, taskSize);
      using buf = DeviceBuffer.alloc(data.length);
      await buf.copyFrom(data);
      const out = newPath('dw');
      await using f = await open(out, 'w+', { compatMode: 'on' });
      assert.equal(await f.write(buf), data.length);
      assert.equal(await f.write(buf.subarray(10, 5000), { fileOffset: 4090 }), 4990);
      const expect = Buffer.from(data);
      data.subarray(10, 5000).copy(expect, 4090);
      assert.ok(fs.readFileSync(out).equals(expect));
      assert.equal(f.stats().routes['posix-device'].operations, 2);
    }
  });

  test('O_DIRECT staged reads and writes with unaligned heads and tails', async () => {
    configure({ taskSize: 1 << 20, bounceBufferSize: 256 * 1024, threads: 4, directIoRead: true, directIoWrite: true });
    try {
      const { file, data } = makeFile(5 * (1 << 20) + 77);
      await using f = await open(file, 'r', { compatMode: 'on' });
      using buf = DeviceBuffer.alloc(data.length);
      for (const [off, size] of [[0, data.length], [3, 4093], [4097, 3 << 20], [data.length - 5, 5]] as const) {
        const n = await f.read(buf, { fileOffset: off, size });
        assert.equal(n, size);
        assert.ok((await buf.subarray(0, n).toBuffer()).equals(data.subarray(off, off + n)));
      }
      const out = newPath('ddw');
      await using w = await open(out, 'w+', { compatMode: 'on' });
      await buf.copyFrom(data);
      assert.equal(await w.write(buf, { fileOffset: 5 }), data.length);
      const back = fs.readFileSync(out);
      assert.ok(back.subarray(5).equals(data));
      assert.ok(back.subarray(0, 5).every((x) => x === 0));
    } finally {
      configure({ directIoRead: 'auto', directIoWrite: false });
    }
  });

  test('a failing copy rejects with the CUDA error name', async () => {
    // Through the pool and the bounce halves: below GATHER_MIN (gathered reads' failures are in
    // fake-gather.test.ts), sixteen tasks of 64 KiB, so the fourth copy fails mid-read.
    configure({ taskSize: 64 * 1024, bounceBufferSize: 64 * 1024, threads: 2, inlineReadMax: 0 });
    const { GATHER_MIN } = await import('../../src/plan/transfer-plan.js');
    const { file } = makeFile(4 << 20);
    await using f = await open(file, 'r', { compatMode: 'on' });
    using buf = DeviceBuffer.alloc(4 << 20);
    async function readerThatFails() {
      await f.read(buf, { size: GATHER_MIN - 64 * 1024 });
    }
    await withEnv({ FAKE_CUDA_FAIL_COPY_AFTER: '3' }, () =>
      assert.rejects(readerThatFails(), (e: Error & { code: string; cudaCode: number }) => {
        assert.equal(e.name, 'CudaError');
        assert.equal(e.code, 'CUDA_ERROR_ILLEGAL_ADDRESS');
        assert.equal(e.cudaCode, 700);
        assert.match(e.stack ?? '', /readerThatFails/, 'the stack points at the caller');
        return true;
      }),
    );
    assert.equal(f.stats().routes['posix-device'].errors, 1);
    const { data } = { data: fs.readFileSync(file) };
    assert.equal(await f.read(buf), 4 << 20, 'the file still reads once the fault is gone');
    assert.ok((await buf.toBuffer()).equals(data));
  });
});
