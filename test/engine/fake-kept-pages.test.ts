/**
 * Kept pages (the fake driver): a range read into a GPU again keeps its page-cache pages
 * registered, and later reads copy straight out of them, as long as the file is unchanged.
 */
import { useFakeDriver, makeFile, withEnv } from '../helpers.js';
useFakeDriver({ FAKE_CUDA_DEVICE_COUNT: '2' });

import assert from 'node:assert/strict';
import fs from 'node:fs';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, before, describe, test } from 'node:test';
const { DeviceBuffer, configure, getConfig, open } = await import('../../src/index.js');
type DeviceBuffer = import('../../src/index.js').DeviceBuffer;
type OpRecord = import('../../src/engine/op-record.js').OpRecord;
const { native } = await import('../../src/addon/binding.js');
const { KEPT_MIN_READ, KEPT_SETTLE_MS, keptPagesBytes } = await import('../../src/engine/kept-pages.js');

const initial = getConfig();
afterEach(() => configure(initial));
const KiB = 1024;
const MiB = KiB * KiB;
const SENTINEL = 0xee;
/** Kept pages belong to penstock's own device path: cuFile (which the fake driver offers) never keeps any. */
const STAGED = { compatMode: 'on' } as const;
/** How a read used kept pages, from its record: undefined where it did not. */
const keptPages = (rec: OpRecord) => (rec.way.kind === 'kept' ? rec.way.pages : undefined);
/** The codes of a record's fallbacks. */
const fellBack = (rec: OpRecord) => rec.fallbacks.map((r) => r.code);

/** Files made before the tests and then left alone past the settle time, so their pages may be kept. */
const settled: { file: string; data: Buffer }[] = [];
before(async () => {
  for (let i = 0; i < 8; i++) settled.push(makeFile(8 * MiB));
  await sleep(KEPT_SETTLE_MS + 100);
});

/** A device buffer of `size` bytes between two pages of sentinels. */
async function sentinelBuffer(size: number, device = 0) {
  const dev = DeviceBuffer.alloc(size + 8192, { device });
  await dev.copyFrom(Buffer.alloc(size + 8192, SENTINEL));
  return dev;
}

/** `size` bytes at page 1 of `dev` equal `want`, and the sentinels around them are untouched. */
async function assertLanded(dev: DeviceBuffer, want: Buffer, label: string) {
  const back = await dev.toBuffer();
  assert.ok(back.subarray(4096, 4096 + want.length).equals(want), `${label}: bytes differ`);
  assert.ok(back.subarray(0, 4096).every((b) => b === SENTINEL), `${label}: before the range written`);
  assert.ok(back.subarray(4096 + want.length).every((b) => b === SENTINEL), `${label}: after the range written`);
}

describe('kept pages', () => {
  test('a range read again is kept: registered by the second read, reused by the third, byte-exact', async () => {
    const { file, data } = settled[0]!;
    const at = 5000, size = 3 * MiB + 7;
    const want = data.subarray(at, at + size);
    await using f = await open(file, 'r', STAGED);
    using dev = await sentinelBuffer(size);
    const first = await f.readRecorded(dev, { fileOffset: at, targetOffset: 4096, size });
    assert.equal(first.route, 'posix-device');
    assert.equal(keptPages(first), undefined);
    await assertLanded(dev, want, 'first read');
    await dev.copyFrom(Buffer.alloc(size + 8192, SENTINEL));
    const second = await f.readRecorded(dev, { fileOffset: at, targetOffset: 4096, size });
    assert.equal(second.route, 'mapped-device');
    assert.equal(keptPages(second), 'registered');
    assert.equal(second.bytes, size);
    await assertLanded(dev, want, 'registering read');
    // Whole pages from the one holding byte 5000 to the one holding the last byte.
    const pinned = Math.ceil((at + size) / 4096) * 4096 - 4096;
    assert.equal(native().keptBytes(), pinned);
    assert.equal(keptPagesBytes(), pinned);
    await dev.copyFrom(Buffer.alloc(size + 8192, SENTINEL));
    const third = await f.readRecorded(dev, { fileOffset: at, targetOffset: 4096, size });
    assert.equal(keptPages(third), 'reused');
    assert.equal(third.route, 'mapped-device');
    await assertLanded(dev, want, 'reusing read');
    // A part of the kept range, elsewhere in the buffer, into the other GPU: the pages are portable.
    using other = await sentinelBuffer(MiB + 5, 1);
    const part = await f.readRecorded(other, { fileOffset: at + MiB, targetOffset: 4096, size: MiB + 5 });
    assert.equal(keptPages(part), 'reused');
    assert.equal(part.device, 1);
    await assertLanded(other, data.subarray(at + MiB, at + 2 * MiB + 5), 'part into GPU 1');
    const stats = f.stats().routes['mapped-device'];
    assert.equal(stats.operations, 3);
    assert.equal(stats.bytes, 2 * size + MiB + 5);
    await f.close();
    assert.equal(native().keptBytes(), 0, 'closing the file releases its pages');
    assert.equal(keptPagesBytes(), 0);
  });

  test('a kept range of up to inlineReadMax is read on the calling thread', async () => {
    const { file, data } = settled[1]!;
    const size = KEPT_MIN_READ;
    await using f = await open(file, 'r', STAGED);
    using dev = await sentinelBuffer(size);
    for (let i = 0; i < 2; i++) await f.read(dev, { fileOffset: 8192, targetOffset: 4096, size });
    await dev.copyFrom(Buffer.alloc(size + 8192, SENTINEL));
    const seen: number[] = [];
    const rec = await f.readRecorded(dev, { fileOffset: 8192, targetOffset: 4096, size, onProgress: (n) => seen.push(n) });
    assert.deepEqual(rec.way, { kind: 'kept', pages: 'reused', onCallingThread: true });
    assert.deepEqual(seen, [size]);
    await assertLanded(dev, data.subarray(8192, 8192 + size), 'inline reuse');
  });

  test('reads smaller than KEPT_MIN_READ, and keptPagesMax 0, never keep pages', async () => {
    const { file } = settled[2]!;
    await using f = await open(file, 'r', STAGED);
    using dev = await sentinelBuffer(2 * MiB);
    for (let i = 0; i < 3; i++) assert.equal(keptPages(await f.readRecorded(dev, { size: KEPT_MIN_READ - 4096 })), undefined);
    configure({ keptPagesMax: 0 });
    for (let i = 0; i < 3; i++) assert.equal(keptPages(await f.readRecorded(dev, { size: 2 * MiB })), undefined);
    assert.equal(native().keptBytes(), 0);
  });

  test('a file written after its pages were kept is read again through staging (KEPT_PAGES_STALE)', async () => {
    const { file, data } = settled[3]!;
    const size = 2 * MiB;
    await using f = await open(file, 'r', STAGED);
    using dev = await sentinelBuffer(size);
    for (let i = 0; i < 2; i++) await f.read(dev, { targetOffset: 4096, size });
    assert.equal(native().keptBytes(), size);
    const fresh = Buffer.alloc(4096, 0x5a);
    const fd = fs.openSync(file, 'r+');
    fs.writeSync(fd, fresh, 0, fresh.length, MiB);
    fs.closeSync(fd);
    const rec = await f.readRecorded(dev, { targetOffset: 4096, size });
    assert.equal(rec.route, 'posix-device');
    assert.deepEqual(fellBack(rec), ['KEPT_PAGES_STALE']);
    const want = Buffer.from(data.subarray(0, size));
    fresh.copy(want, MiB);
    await assertLanded(dev, want, 'after the write');
    assert.equal(native().keptBytes(), 0, 'the stale pages were released');
  });

  test('a file truncated under its kept pages gives the short count, not the old bytes', async () => {
    const { file, data } = settled[4]!;
    const size = 4 * MiB;
    await using f = await open(file, 'r', STAGED);
    using dev = await sentinelBuffer(size);
    for (let i = 0; i < 2; i++) await f.read(dev, { targetOffset: 4096, size });
    fs.truncateSync(file, 3 * MiB);
    await dev.copyFrom(Buffer.alloc(size + 8192, SENTINEL));
    const rec = await f.readRecorded(dev, { targetOffset: 4096, size });
    assert.deepEqual(fellBack(rec), ['KEPT_PAGES_STALE']);
    assert.equal(rec.bytes, 3 * MiB);
    const back = await dev.toBuffer();
    assert.ok(back.subarray(4096, 4096 + 3 * MiB).equals(data.subarray(0, 3 * MiB)));
    assert.ok(back.subarray(4096 + 3 * MiB).every((b) => b === SENTINEL), 'nothing past the end of the file written');
  });

  test('a range read again whose pages left the page cache is not kept (KEPT_PAGES_NOT_CACHED), and is kept once they are back', async (t) => {
    const { file, data } = settled[5]!;
    const size = 2 * MiB, at = 4 * MiB;
    await using f = await open(file, 'r', STAGED);
    using dev = await sentinelBuffer(size);
    await f.read(dev, { fileOffset: at, targetOffset: 4096, size });
    const fd = fs.openSync(file, 'r');
    try {
      fs.fdatasyncSync(fd);
      native().dropCache(fd);
      if (native().residency(fd, at, size, 512) > 0) return t.skip('this file system keeps the pages despite POSIX_FADV_DONTNEED');
    } finally {
      fs.closeSync(fd);
    }
    await dev.copyFrom(Buffer.alloc(size + 8192, SENTINEL));
    const second = await f.readRecorded(dev, { fileOffset: at, targetOffset: 4096, size });
    assert.equal(second.route, 'posix-device');
    assert.equal(keptPages(second), undefined);
    assert.deepEqual(fellBack(second), ['KEPT_PAGES_NOT_CACHED']);
    assert.equal(native().keptBytes(), 0, 'nothing pinned');
    await assertLanded(dev, data.subarray(at, at + size), 'a cold second read');
    // That read was buffered: the pages are back, and the next read keeps them.
    const third = await f.readRecorded(dev, { fileOffset: at, targetOffset: 4096, size });
    assert.equal(keptPages(third), 'registered');
    assert.deepEqual(fellBack(third), []);
  });

  test('a file changed less than the settle time ago is not kept (KEPT_PAGES_RECENT), and not tried again at once', async () => {
    const { file, data } = makeFile(2 * MiB);
    await using f = await open(file, 'r', STAGED);
    using dev = await sentinelBuffer(2 * MiB);
    await f.read(dev, { targetOffset: 4096, size: 2 * MiB });
    const second = await f.readRecorded(dev, { targetOffset: 4096, size: 2 * MiB });
    assert.equal(second.route, 'posix-device');
    assert.deepEqual(fellBack(second), ['KEPT_PAGES_RECENT']);
    await assertLanded(dev, data, 'recent file');
    const third = await f.readRecorded(dev, { targetOffset: 4096, size: 2 * MiB });
    assert.deepEqual(fellBack(third), []);
    assert.equal(keptPages(third), undefined);
    assert.equal(native().keptBytes(), 0);
  });

  test('a driver that refuses the registration: KEPT_PAGES_REFUSED, in the record and the route, and staging carries on', async () => {
    const { file, data } = settled[5]!;
    await using f = await open(file, 'r', STAGED);
    using dev = await sentinelBuffer(2 * MiB);
    await withEnv({ FAKE_CUDA_HOST_REGISTER_FAIL: '1' }, async () => {
      await f.read(dev, { targetOffset: 4096, size: 2 * MiB });
      const rec = await f.readRecorded(dev, { targetOffset: 4096, size: 2 * MiB });
      assert.equal(rec.route, 'posix-device');
      assert.deepEqual(fellBack(rec), ['KEPT_PAGES_REFUSED']);
      assert.match(rec.fallbacks[0]!.message, /CUDA_ERROR_NOT_SUPPORTED/);
      await assertLanded(dev, data.subarray(0, 2 * MiB), 'refused');
    });
    assert.equal(f.route.keptPages?.code, 'KEPT_PAGES_REFUSED');
    assert.equal(keptPages(await f.readRecorded(dev, { targetOffset: 4096, size: 2 * MiB })), undefined, 'not tried again');
  });

  test('the addon checks a kept read strictly: task size, one task to keep or issue, progress, unknown spans', async () => {
    const { file } = settled[2]!;
    await using f = await open(file, 'r', STAGED);
    using dev = await sentinelBuffer(2 * MiB);
    const spec = { id: 999_999, keep: false, issue: false, fd: f.fd, fileOffset: 0, size: 2 * MiB, taskSize: 2 * MiB, device: 0, devicePtr: dev.ptr, settleNs: 0 };
    const code = (c: string) => (e: unknown) => (e as { record?: { code?: string } }).record?.code === c || (e as { code?: string }).code === c;
    assert.throws(() => native().submitKept({ ...spec, taskSize: 0 }), code('ERR_PENSTOCK_INVALID_ARGUMENT'));
    assert.throws(() => native().submitKept({ ...spec, size: 2 ** 33, taskSize: 1 }), code('ERR_PENSTOCK_INVALID_ARGUMENT'), 'too many tasks');
    assert.throws(() => native().submitKept({ ...spec, keep: true, taskSize: MiB }), code('ERR_PENSTOCK_INVALID_ARGUMENT'));
    assert.throws(() => native().submitKept({ ...spec, progress: 'yes' as unknown as () => void }), code('ERR_PENSTOCK_INVALID_ARGUMENT'));
    assert.throws(() => native().submitKept({ ...spec, issue: 'yes' as unknown as boolean }), code('ERR_PENSTOCK_INVALID_ARGUMENT'));
    assert.throws(() => native().submitKept({ ...spec, issue: true, keep: true }), code('ERR_PENSTOCK_INVALID_ARGUMENT'), 'issued while it registers');
    assert.throws(() => native().submitKept({ ...spec, issue: true, taskSize: MiB }), code('ERR_PENSTOCK_INVALID_ARGUMENT'), 'issued in two tasks');
    await assert.rejects(native().submitKept(spec).promise, code('ERR_PENSTOCK_INTERNAL'), 'an id never kept');
    assert.throws(() => native().submitKept({ ...spec, issue: true }), code('ERR_PENSTOCK_INTERNAL'), 'an id never kept, issued: refused before anything is queued');
    assert.throws(() => native().readKept(999_999, f.fd, 0, MiB, 0, dev.ptr), code('ERR_PENSTOCK_INTERNAL'));
    assert.equal(native().keptRelease(999_999), false);
  });

  test('a reused range larger than inlineReadMax is issued on the calling thread; an abort still waits for its copy', async () => {
    const { file, data } = settled[0]!;
    const size = 4 * MiB;
    configure({ inlineReadMax: 256 * KiB });
    await using f = await open(file, 'r', STAGED);
    using dev = await sentinelBuffer(size);
    for (let i = 0; i < 2; i++) await f.read(dev, { targetOffset: 4096, size });
    await dev.copyFrom(Buffer.alloc(size + 8192, SENTINEL));
    const seen: number[] = [];
    const rec = await f.readRecorded(dev, { targetOffset: 4096, size, onProgress: (n) => seen.push(n) });
    assert.deepEqual(rec.way, { kind: 'kept', pages: 'reused', onCallingThread: false }, 'on the pool, not the calling thread alone');
    assert.deepEqual(seen, [size]);
    await assertLanded(dev, data.subarray(0, size), 'issued read');
    // Each copy takes 300 ms, one after the other on the lane. With one pool thread, the second
    // read's task starts only once the first read's is done, long after its abort: the task must
    // still wait for its copy (on the worker, the JS thread free), before the read settles and
    // the file closes (unmapping the pages under a copy would fault in the fake's stream).
    configure({ threads: 1 });
    using other = await sentinelBuffer(size);
    await withEnv({ FAKE_CUDA_ASYNC_DELAY_US: '300000' }, async () => {
      const t0 = performance.now();
      const first = f.read(dev, { targetOffset: 4096, size });
      const ac = new AbortController();
      const second = f.read(other, { targetOffset: 4096, size, signal: ac.signal });
      ac.abort();
      let ticks = 0;
      const ticker = setInterval(() => ticks++, 10);
      try {
        await assert.rejects(second, { name: 'AbortError' });
      } finally {
        clearInterval(ticker);
      }
      const ms = performance.now() - t0;
      assert.ok(ms > 500, `the aborted read settled only once its copy was done (${ms.toFixed(0)} ms)`);
      assert.ok(ticks >= (ms / 10) * 0.7, `the JS thread stayed free meanwhile (${ticks} timer ticks in ${ms.toFixed(0)} ms)`);
      assert.equal(await first, size);
    });
    await f.close();
    await assertLanded(other, data.subarray(0, size), 'the aborted read (its copy had been queued)');
    assert.equal(native().keptBytes(), 0);
    await assertLanded(dev, data.subarray(0, size), 'aborted issued read (the copy had been queued)');
  });

  test('kept reads issued into two GPUs at once land byte-exact, each on its own GPU', async () => {
    const { file, data } = settled[6]!;
    const size = 3 * MiB;
    configure({ inlineReadMax: 256 * KiB });
    await using f = await open(file, 'r', STAGED);
    using a = await sentinelBuffer(size, 0);
    using b = await sentinelBuffer(size, 1);
    for (let i = 0; i < 2; i++) await f.read(a, { fileOffset: MiB, targetOffset: 4096, size });
    await a.copyFrom(Buffer.alloc(size + 8192, SENTINEL));
    const recs = await Promise.all(
      // Parts of the kept range, each at its own place: every read writes a byte where all the others do.
      Array.from({ length: 8 }, (_, i) => {
        const skip = (i >> 1) * 4096;
        return f.readRecorded(i % 2 ? b : a, { fileOffset: MiB + skip, targetOffset: 4096 + skip, size: size - skip });
      }),
    );
    for (const [i, rec] of recs.entries()) {
      assert.equal(keptPages(rec), 'reused');
      assert.equal(rec.device, i % 2);
    }
    await assertLanded(a, data.subarray(MiB, MiB + size), 'GPU 0');
    await assertLanded(b, data.subarray(MiB, MiB + size), 'GPU 1');
  });

  test('an issued copy that fails reports the CUDA error and releases the range; the next read keeps it again', async () => {
    const { file, data } = settled[1]!;
    const size = 2 * MiB;
    configure({ inlineReadMax: 256 * KiB });
    await using f = await open(file, 'r', STAGED);
    using dev = await sentinelBuffer(size);
    for (let i = 0; i < 2; i++) await f.read(dev, { fileOffset: 4096, targetOffset: 4096, size });
    assert.equal(native().keptBytes(), size);
    await withEnv({ FAKE_CUDA_FAIL_COPY_AFTER: '0:issued' }, async () => {
      await assert.rejects(f.read(dev, { fileOffset: 4096, targetOffset: 4096, size }), { code: 'CUDA_ERROR_ILLEGAL_ADDRESS' });
    });
    assert.equal(native().keptBytes(), 0, 'the failed range was released');
    assert.equal(f.stats().routes['mapped-device'].errors, 1);
    await dev.copyFrom(Buffer.alloc(size + 8192, SENTINEL));
    const rec = await f.readRecorded(dev, { fileOffset: 4096, targetOffset: 4096, size });
    assert.equal(keptPages(rec), 'registered', 'a range read before is registered again');
    await assertLanded(dev, data.subarray(4096, 4096 + size), 'after the failure');
  });

  test('keptPagesMax: the least recently read range goes first, and a smaller maximum releases at once', async () => {
    const a = settled[6]!, b = settled[7]!;
    configure({ keptPagesMax: 6 * MiB });
    await using fa = await open(a.file, 'r', STAGED);
    await using fb = await open(b.file, 'r', STAGED);
    using dev = await sentinelBuffer(4 * MiB);
    for (let i = 0; i < 2; i++) await fa.read(dev, { targetOffset: 4096, size: 4 * MiB });
    assert.equal(native().keptBytes(), 4 * MiB);
    for (let i = 0; i < 2; i++) await fb.read(dev, { targetOffset: 4096, size: 4 * MiB });
    assert.equal(native().keptBytes(), 4 * MiB, "a's range made room for b's");
    const againA = await fa.readRecorded(dev, { targetOffset: 4096, size: 4 * MiB });
    assert.equal(keptPages(againA), 'registered', "a's range, read before, is kept again");
    await assertLanded(dev, a.data.subarray(0, 4 * MiB), 'a again');
    const bNow = await fb.readRecorded(dev, { targetOffset: 4096, size: 4 * MiB });
    assert.equal(keptPages(bNow), 'registered');
    await assertLanded(dev, b.data.subarray(0, 4 * MiB), 'b again');
    configure({ keptPagesMax: 0 });
    assert.equal(native().keptBytes(), 0);
  });
});
