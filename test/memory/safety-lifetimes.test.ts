/**
 * Lifetimes against the fake driver: nothing a caller can write breaks them, pinned memory is
 * freed exactly once (and only when nothing uses it), a failed re-preparation keeps the old
 * state, copies into one GPU are not held back by work on another, and O_DIRECT reads and
 * writes reach the file that was opened, not whatever its path names now.
 */
import { useFakeDriver, makeFile, newPath, pattern } from '../helpers.js';
useFakeDriver({ FAKE_CUDA_DEVICE_COUNT: '2' });

import assert from 'node:assert/strict';
import fs from 'node:fs';
import { afterEach, describe, test } from 'node:test';
import v8 from 'node:v8';
import vm from 'node:vm';
const p = await import('../../src/index.js');
const { DeviceBuffer, PinnedBuffer, configure, getConfig, open } = p;
const { runtimeInfo } = await import('../../src/doctor.js');

const initial = getConfig();
// Every test starts from the same settings, whether the one before it passed or threw.
afterEach(() => configure(initial));

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;

/** Fails instead of hanging when `promise` does not settle within `ms`. */
async function settlesWithin<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const hang = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not settle within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, hang]);
  } finally {
    clearTimeout(timer);
  }
}

describe('no writable field breaks a lifetime', () => {
  test('setting PinnedBuffer.busy does not let free() run under a read', async () => {
    configure({ threads: 1, taskSize: 4096 });
    try {
      const { file, data } = makeFile(4 << 20);
      await using f = await open(file);
      const pin = PinnedBuffer.alloc(4 << 20);
      const reading = f.read(pin);
      try {
        (pin as unknown as { busy: number }).busy = 0;
      } catch {
        // A getter-only or frozen field is just as good.
      }
      assert.throws(() => pin.free(), { code: 'ERR_PENSTOCK_BUFFER_BUSY' });
      assert.equal(await reading, 4 << 20);
      assert.deepEqual(Buffer.from(pin.bytes), data);
      pin.free();
      assert.equal(pin.freed, true);
    } finally {
      configure({ threads: initial.threads, taskSize: initial.taskSize });
    }
  });

  test('DeviceBuffer.byteLength cannot be changed', async () => {
    const buf = DeviceBuffer.alloc(4096);
    assert.throws(() => {
      (buf as unknown as { byteLength: number }).byteLength = 1 << 30;
    }, TypeError);
    assert.equal(buf.byteLength, 4096);
    const { file } = makeFile(8192);
    await using f = await open(file);
    await assert.rejects(f.read(buf, { size: 8192 }), { code: 'ERR_PENSTOCK_OUT_OF_RANGE' });
    buf.free();
  });
});

describe('pinned memory', () => {
  // Staging fills in on a background thread once a GPU is prepared (earlier tests prepared both):
  // the counts below start after it has, so only the buffers under test move them.
  const stagingSettled = () => Promise.all([p.prepareGpu(0), p.prepareGpu(1)]);

  test('alloc, read, free in a loop: every free() frees, nothing stays pinned', async () => {
    const { file, data } = makeFile(1 << 20);
    await using f = await open(file);
    await stagingSettled();
    const before = runtimeInfo().pinnedBytes;
    for (let i = 0; i < 40; i++) {
      const pin = PinnedBuffer.alloc(1 << 20);
      assert.equal(await f.read(pin), 1 << 20);
      assert.equal(pin.bytes[12345], data[12345]);
      pin.free();
      // The detached buffer's finalizer then runs during the next read, after the next block
      // may have been given the same address.
      gc();
    }
    gc();
    await new Promise((r) => setTimeout(r, 20));
    assert.equal(runtimeInfo().pinnedBytes, before);
  });

  test('a pinned buffer collected without free() is freed once the collector finds it', async () => {
    await stagingSettled();
    const before = runtimeInfo().pinnedBytes;
    (() => {
      for (let i = 0; i < 8; i++) PinnedBuffer.alloc(1 << 20);
    })();
    for (let i = 0; i < 10 && runtimeInfo().pinnedBytes !== before; i++) {
      gc();
      await new Promise((r) => setTimeout(r, 10));
    }
    assert.equal(runtimeInfo().pinnedBytes, before);
  });
});

describe('bounce buffers', () => {
  test('bounce buffers that cannot be allocated fail the reads that need them, and reads still settle after', async () => {
    const { file, data } = makeFile(4 << 20, 77);
    await using f = await open(file, 'r', { compatMode: 'on' });
    const buf = DeviceBuffer.alloc(4 << 20);
    assert.equal(await f.read(buf), 4 << 20);
    // 512 KiB with no reads on the calling thread: below the gathered ones, through a worker's bounce buffer.
    configure({ bounceBufferSize: 2 ** 40, inlineReadMax: 0 });
    await assert.rejects(f.read(buf, { size: 512 << 10 }), { code: 'CUDA_ERROR_OUT_OF_MEMORY' });
    configure({ bounceBufferSize: 'auto', inlineReadMax: initial.inlineReadMax });
    const target = DeviceBuffer.alloc(4 << 20);
    assert.equal(await settlesWithin(f.read(target), 20_000, 'the staged read after a failed re-preparation'), 4 << 20);
    assert.deepEqual(await target.toBuffer(), data);
    buf.free();
    target.free();
  });
});

describe('several GPUs', () => {
  test('a read into GPU 0 settles while reads into GPU 1 keep the pool busy', async () => {
    configure({ threads: 1, taskSize: 64 << 10, bounceBufferSize: 'auto' });
    try {
      const { file } = makeFile(16 << 20, 5);
      const { file: small, data: smallData } = makeFile(64 << 10, 6);
      await using f = await open(file, 'r', { compatMode: 'on' });
      await using g = await open(small, 'r', { compatMode: 'on' });
      const targets = [0, 1, 2, 3].map(() => DeviceBuffer.alloc(16 << 20, { device: 1 }));
      const gpu0 = DeviceBuffer.alloc(64 << 10, { device: 0 });
      let doneOnGpu1 = 0;
      const progress = new Map<number, number>();
      const reads = targets.map((t, i) =>
        f.read(t, {
          onProgress: (n) => {
            progress.set(i, n);
          },
        }),
      );
      let atGpu0 = -1;
      const read0 = g.read(gpu0).then((n) => {
        atGpu0 = [...progress.values()].reduce((a, b) => a + b, 0);
        return n;
      });
      assert.equal(await read0, 64 << 10);
      for (const r of reads) doneOnGpu1 += await r;
      assert.equal(doneOnGpu1, 4 * (16 << 20));
      assert.ok(atGpu0 >= 0 && atGpu0 < doneOnGpu1 / 2, `GPU 0's read settled only after ${atGpu0} of ${doneOnGpu1} bytes for GPU 1`);
      assert.deepEqual(await gpu0.toBuffer(), smallData);
      for (const t of targets) t.free();
      gpu0.free();
    } finally {
      configure({ threads: initial.threads, taskSize: initial.taskSize });
    }
  });
});

describe('O_DIRECT reaches the file that was opened', () => {
  test('after the path is replaced, reads and writes still go to the open file', async () => {
    configure({ directIoRead: true, directIoWrite: true });
    try {
      const { file, data } = makeFile(1 << 20, 11);
      const keep = `${file}.keep`;
      fs.linkSync(file, keep);
      await using f = await open(file, 'r+');
      const other = newPath('replacement');
      fs.writeFileSync(other, pattern(1 << 20, 12));
      fs.renameSync(other, file); // the usual atomic replace
      const got = Buffer.alloc(1 << 20);
      const rec = await f.readRecorded(got);
      assert.equal(rec.direct, true, 'O_DIRECT was not used; the test would prove nothing');
      assert.deepEqual(got, data, "the other file's bytes were read");
      const fresh = pattern(1 << 20, 13);
      assert.equal(await f.write(fresh), 1 << 20);
      assert.deepEqual(fs.readFileSync(keep), fresh);
      assert.deepEqual(fs.readFileSync(file), pattern(1 << 20, 12), 'the replacement was written into');
    } finally {
      configure({ directIoRead: initial.directIoRead, directIoWrite: initial.directIoWrite });
    }
  });
});
