/**
 * Against the fake driver: the mapped route (page-cache pages registered with CUDA, copied from
 * the range's end while the staged path works from its front), how many tasks of a write run at
 * once, and the per-stage times in the stats.
 */
import { useFakeDriver, withEnv, makeFile, newPath, pattern } from '../helpers.js';
useFakeDriver();

import assert from 'node:assert/strict';
import fs from 'node:fs';
import { afterEach, describe, test } from 'node:test';
const p = { ...(await import('../../src/index.js')), ...(await import('../../src/measure.js')) };
const { DeviceBuffer, configure, getConfig, open } = p;
const { MAPPED_CLAIM_DIVISOR, MAPPED_PIECE, planRead } = await import('../../src/plan/transfer-plan.js');
const { readFactsOf } = await import('../../src/engine/transfer-facts.js');
const { mappedShareOf } = await import('../../src/engine/op-record.js');
/** The plan of a read of `fd`, with the facts gathered from the file as the engine gathers them. */
const planWith = (s: Parameters<typeof planRead>[0], fd: number, fileOffset: number, size: number, intoDevice: boolean, mappedOut: boolean) =>
  planRead(s, readFactsOf(fd, fileOffset, size), fileOffset, size, intoDevice, mappedOut);

const initial = getConfig();
// Every test starts from the same settings, whether the one before it passed or threw.
afterEach(() => configure(initial));

const MiB = 1 << 20;
const mappedPlan = { piece: MAPPED_PIECE, claimDivisor: MAPPED_CLAIM_DIVISOR };

describe('mapped route (mapped-device)', () => {
  // Slow registrations, as on real hardware, so that the staged runners get their share.
  const slow = { FAKE_CUDA_HOST_REGISTER_DELAY_US: '3000' };

  test('a warm read splits between the mapped and staged routes, byte for byte', async () => {
    configure({ threads: 4, taskSize: 64 * 1024, bounceBufferSize: 128 * 1024, mappedReads: true });
    const { file, data } = makeFile(16 * MiB);
    await using f = await open(file, 'r', { compatMode: 'on' });
    using buf = DeviceBuffer.alloc(16 * MiB + 4096);
    await buf.copyFrom(Buffer.alloc(buf.byteLength, 0x5a));
    const rec = await withEnv(slow, () => f.readRecorded(buf, { targetOffset: 4096 }));
    assert.equal(rec.bytes, 16 * MiB);
    const mapped = mappedShareOf(rec);
    assert.equal(rec.way.kind === 'staged' && rec.way.variant, 'mapped');
    assert.ok((mapped?.bytes ?? 0) > 0 && mapped!.bytes < 16 * MiB);
    assert.deepEqual(rec.fallbacks, []);
    const back = await buf.toBuffer();
    assert.ok(back.subarray(4096).equals(data), 'every byte in place');
    assert.ok(back.subarray(0, 4096).every((x) => x === 0x5a), 'nothing before the target offset');
    const r = f.stats().routes;
    assert.ok(r['mapped-device'].ops > 0, 'the mapped route carried tasks');
    assert.ok(r['posix-device'].ops > 0, 'the staged route carried tasks');
    assert.equal(r['mapped-device'].ops + r['posix-device'].ops, 256);
    assert.equal(r['mapped-device'].bytes + r['posix-device'].bytes, 16 * MiB);
    assert.equal(r['mapped-device'].operations, 1);
    assert.equal(r['posix-device'].operations, 1);
    assert.ok(r['mapped-device'].ioSeconds >= 0.003, 'registration time is counted as its I/O');
    assert.equal(f.route.mapped, undefined);
    assert.equal(p.stats().devices[0]?.['mapped-device'].bytes !== undefined, true);
  });

  test('ranges at unaligned offsets or past the end of the file stay on the staged route', async () => {
    configure({ threads: 4, taskSize: 64 * 1024, bounceBufferSize: 128 * 1024, mappedReads: true });
    const { file, data } = makeFile(4 * MiB + 100);
    await using f = await open(file, 'r', { compatMode: 'on' });
    using buf = DeviceBuffer.alloc(8 * MiB);
    for (const [off, size, expect] of [[100, 2 * MiB, 2 * MiB], [0, 8 * MiB, 4 * MiB + 100]] as const) {
      const rec = await withEnv(slow, () => f.readRecorded(buf, { fileOffset: off, size }));
      assert.equal(rec.bytes, expect);
      assert.equal(mappedShareOf(rec), undefined, `no mapped share at ${off}+${size}`);
      assert.ok((await buf.subarray(0, expect).toBuffer()).equals(data.subarray(off, off + expect)));
    }
  });

  test("'auto' maps only large warm reads by small pools; 'false' never maps", async () => {
    const big = newPath('auto');
    fs.writeFileSync(big, Buffer.alloc(64 * MiB, 1)); // in the page cache now
    const bfd = fs.openSync(big, 'r');
    try {
      const s = { ...getConfig(), mappedReads: 'auto' as const };
      assert.deepEqual(planWith({ ...s, threads: 2 }, bfd, 0, 64 * MiB, true, false).mapped, mappedPlan);
      assert.deepEqual(planWith({ ...s, threads: 1 }, bfd, 0, 64 * MiB, true, false).mapped, mappedPlan);
      assert.equal(planWith({ ...s, threads: 4 }, bfd, 0, 64 * MiB, true, false).mapped, undefined, 'not beside many staging threads');
      assert.equal(planWith({ ...s, threads: 2 }, bfd, 0, 32 * MiB, true, false).mapped, undefined, 'not for smaller reads');
      assert.equal(planWith({ ...s, threads: 2 }, bfd, 4096, 64 * MiB, true, false).mapped, undefined, 'not past the end of the file');
      fs.writeFileSync(big, Buffer.alloc(64 * MiB, 2));
      await p.dropPageCache(big);
      if ((await p.pageCacheResidency(big)) < 0.5)
        assert.equal(planWith({ ...s, threads: 2, directIoRead: false }, bfd, 0, 64 * MiB, true, false).mapped, undefined, 'not for a cold range');
    } finally {
      fs.closeSync(bfd);
      fs.rmSync(big);
    }
    const { file } = makeFile(MiB);
    const fd = fs.openSync(file, 'r');
    try {
      const s = { ...getConfig(), mappedReads: 'auto' as const };
      assert.equal(planWith(s, fd, 0, MiB, true, false).mapped, undefined);
      assert.equal(planWith({ ...s, mappedReads: false }, fd, 0, MiB, true, false).mapped, undefined);
      assert.equal(planWith({ ...s, mappedReads: true }, fd, 0, MiB, false, false).mapped, undefined, 'host reads never map');
      assert.equal(planWith({ ...s, mappedReads: true }, fd, 0, MiB, true, true).mapped, undefined, 'a refused file never maps again');
      assert.deepEqual(planWith({ ...s, mappedReads: true, taskSize: 64 * 1024 }, fd, 0, MiB, true, false).mapped, mappedPlan);
    } finally {
      fs.closeSync(fd);
    }
  });

  test('with one thread the mapped runner carries the read alone, and finishes what it cannot map', async () => {
    configure({ threads: 1, taskSize: 64 * 1024, bounceBufferSize: 128 * 1024, mappedReads: true });
    const { file, data } = makeFile(8 * MiB + 4096 * 3);
    await using f = await open(file, 'r', { compatMode: 'on' });
    using buf = DeviceBuffer.alloc(data.length);
    const rec = await f.readRecorded(buf);
    assert.ok((await buf.toBuffer()).equals(data));
    assert.equal(rec.bytes, data.length);
    assert.ok((mappedShareOf(rec)?.tasks ?? 0) > 0);
    // The ends meet in quarters of what is left, so the last tasks go through staging.
    assert.equal(f.stats().routes['mapped-device'].ops + f.stats().routes['posix-device'].ops, Math.ceil(data.length / (64 * 1024)));
    await using g = await open(file, 'r', { compatMode: 'on' });
    const refused = await withEnv({ FAKE_CUDA_HOST_REGISTER_FAIL: '1' }, () => g.readRecorded(buf));
    assert.deepEqual(refused.way, { kind: 'staged', variant: 'bounce' }, 'a mapped share that carried nothing is not claimed');
    assert.deepEqual(refused.fallbacks.map((r) => r.code), ['MAPPED_REFUSED']);
    assert.equal(g.stats().routes['posix-device'].ops, Math.ceil(data.length / (64 * 1024)), 'staging carried it all');
    assert.ok((await buf.toBuffer()).equals(data));
    const ac = new AbortController();
    await using h = await open(file, 'r', { compatMode: 'on' });
    await withEnv({ FAKE_CUDA_HOST_REGISTER_DELAY_US: '3000' }, async () => {
      const pending = h.read(buf, { signal: ac.signal });
      setTimeout(() => ac.abort(), 2);
      await assert.rejects(pending, { name: 'AbortError' });
    });
  });

  test('a refused registration falls back to the staged path and says why', async () => {
    configure({ threads: 4, taskSize: 64 * 1024, bounceBufferSize: 128 * 1024, mappedReads: true });
    const { file, data } = makeFile(8 * MiB);
    await using f = await open(file, 'r', { compatMode: 'on' });
    using buf = DeviceBuffer.alloc(8 * MiB);
    const rec = await withEnv({ FAKE_CUDA_HOST_REGISTER_FAIL: '1' }, () => f.readRecorded(buf));
    assert.ok((await buf.toBuffer()).equals(data));
    assert.equal(rec.bytes, 8 * MiB);
    assert.deepEqual(rec.way, { kind: 'staged', variant: 'bounce' }, 'the staged route carried everything');
    assert.equal(f.route.mapped?.code, 'MAPPED_REFUSED');
    assert.match(f.route.mapped?.message ?? '', /CUDA_ERROR_NOT_SUPPORTED/);
    assert.deepEqual(rec.fallbacks, [f.route.mapped]);
    const again = await f.readRecorded(buf);
    // Read again, the range may be kept (or be refused as too recent): it is never mapped again.
    assert.equal(mappedShareOf(again), undefined, 'the file is not tried again');
    assert.ok(!again.fallbacks.some((r) => r.code === 'MAPPED_REFUSED'), 'nothing refused again');
    assert.equal(f.stats().routes['mapped-device'].operations, 0);
  });

  test('a failing copy on the mapped route rejects with the CUDA error; the file still reads', async () => {
    configure({ threads: 2, taskSize: 64 * 1024, bounceBufferSize: 128 * 1024, mappedReads: true });
    const { file, data } = makeFile(8 * MiB);
    await using f = await open(file, 'r', { compatMode: 'on' });
    using buf = DeviceBuffer.alloc(8 * MiB);
    // Every copy fails, the mapped runner's first piece among them (registered, then copied).
    await withEnv({ ...slow, FAKE_CUDA_FAIL_COPY_AFTER: '0:mapped' }, () =>
      assert.rejects(f.read(buf), (e: Error & { code: string }) => {
        assert.equal(e.name, 'CudaError');
        assert.equal(e.code, 'CUDA_ERROR_ILLEGAL_ADDRESS');
        return true;
      }),
    );
    assert.equal(await withEnv(slow, () => f.read(buf)), 8 * MiB);
    assert.ok((await buf.toBuffer()).equals(data));
  });

  test('cancelling a mapped read rejects with AbortError and leaves nothing registered', async () => {
    configure({ threads: 4, taskSize: 64 * 1024, bounceBufferSize: 128 * 1024, mappedReads: true });
    const { file, data } = makeFile(16 * MiB);
    await using f = await open(file, 'r', { compatMode: 'on' });
    using buf = DeviceBuffer.alloc(16 * MiB);
    const ac = new AbortController();
    await withEnv({ ...slow, FAKE_CUDA_ASYNC_DELAY_US: '2000' }, async () => {
      const pending = f.read(buf, { signal: ac.signal });
      setTimeout(() => ac.abort(), 5);
      await assert.rejects(pending, { name: 'AbortError' });
    });
    // Every page was unregistered: registering the same pages again (a new read) succeeds.
    assert.equal(await withEnv(slow, () => f.read(buf)), 16 * MiB);
    assert.ok((await buf.toBuffer()).equals(data));
  });
});

describe('writes', () => {
  test('buffered writes run at most writeThreads tasks at once; O_DIRECT writes use every thread', async () => {
    const data = pattern(8 * MiB + 12345, 9);
    using dev = DeviceBuffer.alloc(data.length);
    await dev.copyFrom(data);
    for (const [writeThreads, direct, most] of [['auto', false, 4], [2, false, 2], [1, false, 1], [2, true, 8]] as const) {
      configure({ threads: 8, taskSize: 64 * 1024, bounceBufferSize: 128 * 1024, writeThreads, directIoWrite: direct });
      for (const source of [dev, data]) {
        const out = newPath('wt');
        await using f = await open(out, 'w', { compatMode: 'on' });
        // Slow device copies keep tasks running long enough to overlap.
        const rec = await withEnv({ FAKE_CUDA_ASYNC_DELAY_US: '1000' }, () => f.writeRecorded(source));
        assert.equal(rec.bytes, data.length);
        assert.ok((rec.peakTasks ?? 0) <= most, `${writeThreads}/${direct}: at most ${most} at once, saw ${rec.peakTasks}`);
        if (most > 1 && source === dev) assert.ok((rec.peakTasks ?? 0) > 1, `${writeThreads}/${direct}: tasks overlapped`);
        assert.ok(fs.readFileSync(out).equals(data));
      }
    }
    configure({ writeThreads: 'auto', directIoWrite: false });
  });

  test('a write of one task moves in pieces, every byte in place', async () => {
    configure({ threads: 4, taskSize: 4 * MiB, bounceBufferSize: 8 * MiB });
    for (const size of [1, 4095, 64 * 1024 + 1, 300001, 4 * MiB - 1]) {
      const data = pattern(size, size);
      using dev = DeviceBuffer.alloc(size);
      await dev.copyFrom(data);
      const out = newPath('wp');
      await using f = await open(out, 'w', { compatMode: 'on' });
      assert.equal(await f.write(dev, { fileOffset: 3 }), size);
      const back = fs.readFileSync(out);
      assert.ok(back.subarray(3).equals(data), `size ${size}`);
    }
  });
});

describe('stage times', () => {
  test('busy time splits into system calls, copy waits and the rest', async () => {
    configure({ threads: 2, taskSize: 256 * 1024, bounceBufferSize: 512 * 1024, mappedReads: false });
    const { file } = makeFile(4 * MiB);
    await using f = await open(file, 'r', { compatMode: 'on' });
    using dev = DeviceBuffer.alloc(4 * MiB);
    await f.read(dev);
    await f.read(Buffer.alloc(4 * MiB));
    const out = newPath('st');
    await using w = await open(out, 'w', { compatMode: 'on' });
    await w.write(dev);
    for (const [book, route] of [[f, 'posix-device'], [f, 'posix-host'], [w, 'posix-device']] as const) {
      const c = book.stats().routes[route];
      assert.ok(c.ioSeconds > 0, `${route}: time in system calls`);
      assert.ok(c.ioSeconds + c.waitSeconds <= c.busySeconds * 1.001, `${route}: stages within busy time`);
      if (route === 'posix-device') assert.ok(c.waitSeconds > 0, `${route}: time waiting for copies`);
      else assert.equal(c.waitSeconds, 0);
    }
  });
});
