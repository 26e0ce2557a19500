/**
 * Device logic against the fake driver, the cuFile side: the cuFile path and its fallbacks, routing
 * by threshold, short reads, several GPUs and files at once. (Buffers and the staged path are in
 * fake-device.test.ts.)
 */
import { useFakeDriver, withEnv, makeFile, newPath, pattern, sha256 } from '../helpers.js';
useFakeDriver({ FAKE_CUDA_DEVICE_COUNT: '2' });

import assert from 'node:assert/strict';
import fs from 'node:fs';
import { afterEach, before, describe, test } from 'node:test';
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

// A GPU prepared before the first open(), its cuFile driver open, as in a process that prepared ahead.
before(() => p.prepareGpu(0));

describe('cuFile path', () => {
  test('auto mode registers the file; counters say gds; data matches', async () => {
    configure({ taskSize: 1 << 20, threads: 4 });
    const { file, data } = makeFile(6 * (1 << 20) + 5);
    await using f = await open(file);
    using buf = DeviceBuffer.alloc(data.length);
    // A GPU is already in use in this process, so open() registered the file at once.
    assert.equal(f.route.device, 'cufile');
    assert.equal(await f.read(buf), data.length);
    assert.equal(f.route.device, 'cufile');
    assert.equal(f.route.reason, undefined);
    assert.ok((await buf.toBuffer()).equals(data));
    assert.deepEqual(
      { ops: f.stats().routes.gds.ops, bytes: f.stats().routes.gds.bytes },
      { ops: 7, bytes: data.length },
    );
    assert.equal(f.stats().devices[0]?.gds.ops, 7);
  });

  test('counters showing POSIX I/O inside cuFile make it cufile-compat; no counters make it unknown', async () => {
    configure({ taskSize: 1 << 20, threads: 4 });
    const { file, data } = makeFile(2 << 20);
    await using f = await open(file);
    using buf = DeviceBuffer.alloc(data.length);
    // 2 MiB over 4 threads: 4 tasks of 512 KiB.
    await withEnv({ FAKE_CUFILE_MODE: 'compat' }, () => f.read(buf));
    assert.equal(f.stats().routes['cufile-compat'].ops, 4);
    assert.equal(f.stats().routes.gds.ops, 0);
    await withEnv({ FAKE_CUFILE_NO_STATS: '1' }, () => f.read(buf));
    assert.equal(f.stats().routes['cufile-unknown'].ops, 4);
    assert.ok((await buf.toBuffer()).equals(data));
  });

  test('reads below the threshold take the staged path even where cuFile works', async () => {
    configure({ taskSize: 1 << 20, threads: 4, gdsThreshold: 64 * 1024 });
    const { file, data } = makeFile(1 << 20);
    await using f = await open(file);
    using buf = DeviceBuffer.alloc(1 << 20);
    await f.read(buf, { size: 4096, fileOffset: 100 });
    assert.equal(f.stats().routes['posix-device'].ops, 1);
    assert.ok((await buf.subarray(0, 4096).toBuffer()).equals(data.subarray(100, 4196)));
    await f.read(buf);
    assert.equal(f.stats().routes.gds.ops, 4, '1 MiB over 4 threads: 4 tasks of 256 KiB');
    configure({ gdsThreshold: initial.gdsThreshold });
  });

  test('short reads and writes from cuFile are continued', async () => {
    configure({ taskSize: 1 << 20, threads: 3 });
    const { file, data } = makeFile(3 * (1 << 20) + 11);
    await using f = await open(file, 'r+');
    using buf = DeviceBuffer.alloc(data.length);
    await withEnv({ FAKE_CUFILE_SHORT: '1000' }, async () => {
      assert.equal(await f.read(buf, { fileOffset: 0 }), data.length);
      assert.ok((await buf.toBuffer()).equals(data));
      const n = await f.read(buf, { fileOffset: data.length - 100 });
      assert.equal(n, 100);
      await buf.copyFrom(pattern(data.length, 99));
      assert.equal(await f.write(buf, { fileOffset: 0 }), data.length);
    });
    assert.ok(fs.readFileSync(file).equals(pattern(data.length, 99)));
    assert.equal(f.stats().routes.gds.operations, 3);
  });

  for (const [style, check] of [
    ['negative', { name: 'CuFileError', code: 'CU_FILE_IO_ERROR', cufileCode: 5044 }],
    ['errno-cufile', { name: 'CuFileError', code: 'CU_FILE_IO_ERROR', cufileCode: 5044 }],
    ['errno', { name: 'PenstockSystemError', code: 'EIO', syscall: 'cuFileRead' }],
  ] as const) {
    test(`a cuFile failure mid-operation (${style} convention) rejects with a typed error`, async () => {
      configure({ taskSize: 64 * 1024, threads: 2 });
      const { file } = makeFile(2 << 20);
      await using f = await open(file);
      using buf = DeviceBuffer.alloc(2 << 20);
      await withEnv({ FAKE_CUFILE_FAIL_AFTER: `3:${style}`, FAKE_CUFILE_FAIL_STYLE: style }, () => assert.rejects(f.read(buf), check));
      assert.equal(f.stats().routes['cufile-unknown'].errors + f.stats().routes.gds.errors, 1);
    });
  }

  test('a refused registration (5027) falls back to the staged path with the reason on record', async () => {
    configure({ taskSize: 1 << 20, threads: 4 });
    const { file, data } = makeFile(4 << 20);
    await withEnv({ FAKE_CUFILE_REGISTER_ERROR: '5027' }, async () => {
      await using f = await open(file);
      using buf = DeviceBuffer.alloc(data.length);
      assert.equal(await f.read(buf), data.length);
      assert.ok((await buf.toBuffer()).equals(data));
      const r = f.route;
      assert.equal(r.device, 'posix-device');
      assert.equal(r.reason?.code, 'CUFILE_HANDLE_REFUSED');
      assert.equal(r.reason?.cufileCode, 'CU_FILE_HANDLE_NOT_REGISTERED');
      assert.equal(r.reason?.cufileNumber, 5027);
      assert.match(r.reason!.message, /udev/);
      // Tasks as the staged route plans them (a read of 4 MiB is gathered, in tasks of its own).
      const { planDeviceRead } = await import('../../src/plan/transfer-plan.js');
      assert.equal(f.stats().routes['posix-device'].ops, data.length / planDeviceRead(getConfig(), data.length, false, false).taskSize);
      assert.equal(f.stats().routes.gds.ops, 0);
    });
  });

  test("compatMode 'off' turns a refusal into an error that says why, touching nothing", async () => {
    const { file } = makeFile(1 << 20);
    await withEnv({ FAKE_CUFILE_REGISTER_ERROR: '5027' }, async () => {
      await using f = await open(file, 'r', { compatMode: 'off' });
      using buf = DeviceBuffer.alloc(1 << 20);
      await buf.copyFrom(Buffer.alloc(1 << 20, 0x42));
      await assert.rejects(f.read(buf), (e: Error & { code: string }) => {
        assert.equal(e.name, 'CuFileError');
        assert.equal(e.code, 'CU_FILE_HANDLE_NOT_REGISTERED');
        assert.match(e.message, /compatMode is 'off'/);
        return true;
      });
      assert.ok((await buf.toBuffer()).every((x) => x === 0x42));
      await assert.rejects(f.read(buf, { size: 10 }), { code: 'CU_FILE_HANDLE_NOT_REGISTERED' });
    });
  });

  test('a 1 GiB read with default settings is 256 tasks under one route', async () => {
    configure(initial);
    const file = newPath('sparse');
    fs.writeFileSync(file, '');
    fs.truncateSync(file, 2 ** 30);
    resetStats();
    const buf = await readFileToDevice(file);
    try {
      assert.equal(buf.byteLength, 2 ** 30);
      const s = stats().routes;
      assert.equal(s.gds.ops, 256);
      assert.equal(s.gds.bytes, 2 ** 30);
      assert.equal(s['posix-device'].ops + s['cufile-compat'].ops + s['cufile-unknown'].ops, 0);
      assert.equal(sha256(await buf.subarray(0, 1 << 20).toBuffer()), sha256(Buffer.alloc(1 << 20)));
    } finally {
      buf.free();
      fs.rmSync(file);
    }
  });
});

describe('several GPUs and files', () => {
  test('reads into GPU 1 and GPU 0 at once, stats per GPU', async () => {
    configure({ taskSize: 1 << 20, threads: 4 });
    resetStats();
    const a = makeFile(3 << 20);
    const b = makeFile(5 << 20);
    const [da, db] = await Promise.all([readFileToDevice(a.file, { device: 1 }), readFileToDevice(b.file, { device: 0 })]);
    assert.equal(da.device, 1);
    assert.ok((await da.toBuffer()).equals(a.data));
    assert.ok((await db.toBuffer()).equals(b.data));
    // 3 MiB over 4 threads: 4 tasks of 768 KiB; 5 MiB: 5 tasks of the 1 MiB task size.
    assert.equal(stats().devices[1]?.gds.ops, 4);
    assert.equal(stats().devices[0]?.gds.ops, 5);
    da.free();
    db.free();
  });

  test('device writes via writeFile, abort of a device read', async () => {
    configure({ taskSize: 64 * 1024, threads: 1 });
    const data = pattern(3 << 20, 77);
    using buf = DeviceBuffer.alloc(data.length, { device: 1 });
    await buf.copyFrom(data);
    const out = newPath('wf');
    assert.equal(await writeFile(out, buf), data.length);
    assert.ok(fs.readFileSync(out).equals(data));
    const big = makeFile(16 << 20);
    await using f = await open(big.file, 'r', { compatMode: 'on' });
    using target = DeviceBuffer.alloc(16 << 20);
    const ac = new AbortController();
    await assert.rejects(f.read(target, { signal: ac.signal, onProgress: () => ac.abort(new Error('stop')) }), (e: Error & { cause?: Error }) => {
      assert.equal(e.name, 'AbortError');
      assert.equal(e.cause?.message, 'stop');
      return true;
    });
  });
});
