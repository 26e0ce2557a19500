/** Loading shards into several (fake) GPUs at once. */
import { useFakeDriver, makeFile } from '../helpers.js';
useFakeDriver({ FAKE_CUDA_DEVICE_COUNT: '3' });

import assert from 'node:assert/strict';
import { afterEach, test } from 'node:test';
const { DeviceBuffer, configure, getConfig, prepareGpu } = await import('../../src/index.js');
const { loadShards } = await import('../../src/batch.js');
const { stats, resetStats } = await import('../../src/measure.js');

const initial = getConfig();
afterEach(() => configure(initial));

test('files and ranges dealt over three GPUs, verified per shard', async () => {
  configure({ taskSize: 1 << 20, threads: 4 });
  // cuFile's driver opens in the background; the shards below must meet it open.
  await Promise.all([prepareGpu(1), prepareGpu(2)]);
  resetStats();
  const a = makeFile(5 << 20);
  const b = makeFile((3 << 20) + 7);
  const shards = [
    { path: a.file },
    { path: a.file, offset: 1 << 20, size: 2 << 20 },
    { path: b.file },
    { path: b.file, device: 0, offset: 100, size: 5000 },
  ];
  let last = 0;
  const results = await loadShards(shards, { onProgress: (n) => (last = n) });
  assert.deepEqual(results.map((r) => r.device), [0, 1, 2, 0]);
  const expect = [a.data, a.data.subarray(1 << 20, 3 << 20), b.data, b.data.subarray(100, 5100)];
  for (let i = 0; i < shards.length; i++) {
    const r = results[i]!;
    assert.equal(r.error, undefined);
    assert.equal(r.buffer!.device, r.device);
    assert.ok((await r.buffer!.toBuffer()).equals(expect[i]!), `shard ${i}`);
    assert.equal(r.bytes, expect[i]!.length);
    assert.ok(r.carried && r.carried.tasks >= 1);
    r.buffer!.free();
  }
  assert.equal(last, expect.reduce((s, x) => s + x.length, 0));
  // 5000 bytes is under the 16 KiB threshold, so that shard is staged even though cuFile works.
  assert.equal(results[3]!.carried!.route, 'posix-device');
  // The 2 MiB range over 4 threads: 4 tasks of 512 KiB.
  assert.equal(stats().devices[1]?.gds.ops, 4);
  assert.equal(stats().devices[2]?.gds.ops, 4);
});

test('settle mode reports per-shard failures; fail-fast rejects and frees', async () => {
  const a = makeFile(1 << 20);
  const results = await loadShards([{ path: a.file }, { path: '/nonexistent/shard' }, { path: a.file, offset: 10, size: 10, target: DeviceBuffer.alloc(5) }]);
  assert.equal(results[0]!.error, undefined);
  assert.equal((results[1]!.error as Error & { code: string }).code, 'ENOENT');
  assert.equal((results[2]!.error as Error & { code: string }).code, 'ERR_PENSTOCK_OUT_OF_RANGE');
  results[0]!.buffer!.free();
  await assert.rejects(loadShards([{ path: a.file }, { path: '/nonexistent/x' }], { mode: 'fail-fast', concurrency: 1 }), { code: 'ENOENT' });
  await assert.rejects(loadShards([{ path: a.file, device: 3 }]), { code: 'ERR_PENSTOCK_INVALID_DEVICE' });
  const ac = new AbortController();
  ac.abort();
  const aborted = await loadShards([{ path: a.file }], { signal: ac.signal });
  assert.equal(aborted[0]!.error?.name, 'AbortError');
});
