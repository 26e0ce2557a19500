/**
 * Gathered reads against the fake driver (its copies really are asynchronous, each one delayed):
 * a mid-size staged read into the GPU fills the device's one pinned stage from many workers and
 * goes to the GPU in ordered copies on one stream; a second read while the stage is held goes
 * through the bounce halves; failures and aborts leave the stage free for the next read.
 */
import { useFakeDriver, makeFile, withEnv } from '../helpers.js';
useFakeDriver({ FAKE_CUDA_DEVICE_COUNT: '2' });

import assert from 'node:assert/strict';
import { afterEach, before, describe, test } from 'node:test';
import type { DeviceBuffer as DeviceBufferType, PenstockFile } from '../../src/index.js';
import type { OpRecord } from '../../src/engine/op-record.js';
const { DeviceBuffer, configure, getConfig, open, prepareGpu } = await import('../../src/index.js');
const { GATHER_COPY, GATHER_MIN, GATHER_TASK } = await import('../../src/plan/transfer-plan.js');

const initial = getConfig();
afterEach(() => configure(initial));
// Both GPUs' stages allocated in full before the reads (a fresh process fills them beside its first reads).
before(async () => {
  await prepareGpu(0);
  await prepareGpu(1);
});
const KiB = 1024;
const MiB = 1024 * KiB;
// Every read below goes to the pool (none on the calling thread) by the staged route.
const POOL_ONLY = { inlineReadMax: 0, threads: 4 } as const;
/** A gathered read's copies, from its record: undefined where it was not gathered. */
const orderedCopies = (rec: OpRecord) => (rec.way.kind === 'staged' && rec.way.variant === 'gathered' ? rec.way.orderedCopies : undefined);

/**
 * A read of a whole file of `size` bytes, started by `read` under the fake driver's `env`, rejects
 * as `rejection`; once it has, nothing more lands in the buffer (every copy it issued had
 * settled), and the next read is gathered again (the stage was given back) and byte-exact.
 */
async function settlesThenFreesTheStage(
  size: number,
  env: Record<string, string>,
  read: (f: PenstockFile, dev: DeviceBufferType) => Promise<unknown>,
  rejection: { code?: string; name?: string },
): Promise<void> {
  configure(POOL_ONLY);
  const { file, data } = makeFile(size);
  await using f = await open(file, 'r', { compatMode: 'on' });
  using dev = DeviceBuffer.alloc(size);
  await dev.copyFrom(Buffer.alloc(size, 0x11));
  await withEnv(env, () => assert.rejects(read(f, dev), rejection));
  const snapshot = await dev.toBuffer();
  await new Promise((r) => setTimeout(r, 50));
  assert.ok((await dev.toBuffer()).equals(snapshot), 'nothing written after the rejection');
  const rec = await f.readRecorded(dev);
  assert.ok(orderedCopies(rec) !== undefined, 'gathered again');
  assert.ok((await dev.toBuffer()).equals(data));
}

describe('gathered reads into the GPU', () => {
  test('byte-exact at every size and offset, in ordered copies of at least GATHER_COPY, the rest untouched', async () => {
    configure(POOL_ONLY);
    const fileSize = 9 * MiB + 4321;
    const { file, data } = makeFile(fileSize);
    await using f = await open(file, 'r', { compatMode: 'on' });
    using dev = DeviceBuffer.alloc(8 * MiB);
    // Whole tasks; a last task of a few bytes; an odd file offset; a read that meets the end of
    // the file in its middle (the tasks past it read nothing).
    for (const [fileOffset, targetOffset, size] of [
      [0, 0, GATHER_MIN],
      [7, 5, 3 * MiB + 12345],
      [GATHER_TASK * 3, 0, 5 * GATHER_TASK + 1],
      [fileSize - 2 * MiB - 5, 100, 4 * MiB],
    ] as const) {
      await dev.copyFrom(Buffer.alloc(dev.byteLength, 0xa7));
      const rec = await f.readRecorded(dev, { fileOffset, targetOffset, size });
      const want = Math.min(size, fileSize - fileOffset);
      const label = `${fileOffset}+${size}`;
      assert.equal(rec.bytes, want, label);
      assert.equal(rec.route, 'posix-device', label);
      const copies = orderedCopies(rec);
      assert.ok(copies !== undefined && copies >= 1, `${label}: gathered`);
      assert.ok(copies <= Math.ceil(want / GATHER_COPY), `${label}: ${copies} copies, each but the last at least GATHER_COPY`);
      assert.equal(rec.tasks, Math.ceil(size / GATHER_TASK), label);
      const back = await dev.toBuffer();
      assert.ok(back.subarray(targetOffset, targetOffset + want).equals(data.subarray(fileOffset, fileOffset + want)), `${label}: data`);
      assert.ok(back.subarray(0, targetOffset).every((b) => b === 0xa7), `${label}: before untouched`);
      assert.ok(back.subarray(targetOffset + want).every((b) => b === 0xa7), `${label}: after untouched`);
    }
  });

  test('reads below GATHER_MIN, writes and O_DIRECT reads are not gathered', async () => {
    configure(POOL_ONLY);
    const { file, data } = makeFile(4 * MiB);
    await using f = await open(file, 'r+', { compatMode: 'on' });
    using dev = DeviceBuffer.alloc(2 * MiB);
    const small = await f.readRecorded(dev, { size: GATHER_MIN - 4096 });
    assert.deepEqual(small.way, { kind: 'staged', variant: 'bounce' });
    assert.ok((await dev.subarray(0, GATHER_MIN - 4096).toBuffer()).equals(data.subarray(0, GATHER_MIN - 4096)));
    const written = await f.writeRecorded(dev, { fileOffset: 0 });
    assert.deepEqual(written.way, { kind: 'staged', variant: 'bounce' });
    configure({ ...POOL_ONLY, directIoRead: true });
    const direct = await f.readRecorded(dev, { fileOffset: 0 });
    assert.equal(direct.direct, true);
    assert.deepEqual(direct.way, { kind: 'staged', variant: 'bounce' });
  });

  test('a second read while the stage is held goes through the bounce halves; both byte-exact', async () => {
    configure(POOL_ONLY);
    const { file, data } = makeFile(6 * MiB);
    await using f = await open(file, 'r', { compatMode: 'on' });
    using a = DeviceBuffer.alloc(3 * MiB);
    using b = DeviceBuffer.alloc(3 * MiB);
    // Copies held back long enough that the first read still holds the stage when the second starts.
    const [ra, rb] = await withEnv({ FAKE_CUDA_ASYNC_DELAY_US: '20000' }, () =>
      Promise.all([f.readRecorded(a, { fileOffset: 0 }), f.readRecorded(b, { fileOffset: 3 * MiB })]),
    );
    assert.equal([ra, rb].filter((r) => orderedCopies(r) !== undefined).length, 1, 'exactly one held the stage');
    assert.ok((await a.toBuffer()).equals(data.subarray(0, 3 * MiB)));
    assert.ok((await b.toBuffer()).equals(data.subarray(3 * MiB)));
    const again = await f.readRecorded(a, { fileOffset: MiB });
    assert.ok(orderedCopies(again) !== undefined, 'the stage is free again');
    assert.ok((await a.toBuffer()).equals(data.subarray(MiB, 4 * MiB)));
  });

  test('each GPU has its own stage: reads into two GPUs at once are both gathered, byte-exact', async () => {
    configure(POOL_ONLY);
    const { file, data } = makeFile(6 * MiB);
    await using f = await open(file, 'r', { compatMode: 'on' });
    using a = DeviceBuffer.alloc(3 * MiB, { device: 0 });
    using b = DeviceBuffer.alloc(3 * MiB, { device: 1 });
    // Copies held back, so each read still holds its stage while the other runs.
    const recs = await withEnv({ FAKE_CUDA_ASYNC_DELAY_US: '20000' }, () =>
      Promise.all([f.readRecorded(a, { fileOffset: 0 }), f.readRecorded(b, { fileOffset: 3 * MiB })]),
    );
    assert.deepEqual(recs.map((r) => [r.device, orderedCopies(r) !== undefined]), [[0, true], [1, true]]);
    assert.ok((await a.toBuffer()).equals(data.subarray(0, 3 * MiB)));
    assert.ok((await b.toBuffer()).equals(data.subarray(3 * MiB)));
  });

  test('a failing copy rejects with its CUDA code after every copy settled; the stage is free again', async () => {
    await settlesThenFreesTheStage(8 * MiB, { FAKE_CUDA_FAIL_COPY_AFTER: '0:gather' }, (f, dev) => f.read(dev), { code: 'CUDA_ERROR_ILLEGAL_ADDRESS' });
  });

  test('an abort rejects once every copy issued has landed; the stage is free again', async () => {
    await settlesThenFreesTheStage(16 * MiB, { FAKE_CUDA_ASYNC_DELAY_US: '5000' }, (f, dev) => {
      const ac = new AbortController();
      setTimeout(() => ac.abort(), 2);
      return f.read(dev, { signal: ac.signal });
    }, { name: 'AbortError' });
  });
});
