/**
 * A large read of uncached data into the GPU from a disk that is not NVMe, against the fake
 * driver: the page cache's readahead, one stripe per worker through its bounce halves, and the
 * record and the file's route say so.
 */
import { dropPagesOrSkip, useFakeDriver, machineWith, makeFile } from '../helpers.js';
useFakeDriver();

import assert from 'node:assert/strict';
import { afterEach, test } from 'node:test';
const { DeviceBuffer, configure, getConfig, open } = await import('../../src/index.js');

const initial = getConfig();
afterEach(() => configure(initial));
const MiB = 1 << 20;

test('an uncached read of 64 MiB or more from a virtio disk goes striped into the GPU: one task per worker, byte-exact', async (t) => {
  const size = 70 * MiB;
  const { file, data } = makeFile(size);
  // Three workers: a stripe is the range over the workers rounded up to whole pages, so the last is short.
  const threads = 3;
  configure({ directIoRead: 'auto', threads, inlineReadMax: 0, systemRoot: machineWith(file, 'vda', true) });
  await using f = await open(file, 'r', { compatMode: 'on' });
  using dev = DeviceBuffer.alloc(size);

  const warm = await f.readRecorded(dev, { fileOffset: 1 });
  assert.deepEqual(warm.way, { kind: 'staged', variant: 'bounce' }, 'cached: no stripes');
  assert.equal(f.route.coldReads, undefined, 'no cold read yet');

  if (!(await dropPagesOrSkip(t, file))) return;
  await dev.copyFrom(Buffer.alloc(size, 0xa7));
  const cold = await f.readRecorded(dev, { fileOffset: 1 });
  assert.deepEqual(cold.way, { kind: 'staged', variant: 'striped' });
  assert.equal(cold.route, 'posix-device');
  assert.equal(cold.direct, false);
  // The same range read again: its pages would be kept registered, but they are not cached.
  assert.deepEqual(cold.fallbacks.map((r) => r.code), ['KEPT_PAGES_NOT_CACHED']);
  assert.equal(cold.tasks, threads, 'one stripe per worker');
  assert.equal(cold.bytes, size - 1);
  assert.deepEqual(f.route.coldReads, { device: 'vda', direct: false });
  const back = await dev.toBuffer();
  assert.ok(back.subarray(0, size - 1).equals(data.subarray(1)), 'data');
  assert.equal(back[size - 1], 0xa7, 'the byte past the end of the file untouched');
});
