/**
 * Remote reads into GPU memory against the fake driver: bodies through pinned staging, copied to
 * the GPU asynchronously; bytes, offsets, stats, staging lifetime and copy failures.
 */
import { useFakeDriver, withEnv, pattern } from '../../helpers.js';
useFakeDriver({ FAKE_CUDA_ASYNC_DELAY_US: '2000' });

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { RangeServer } from '../../remote-range-server.js';
const { DeviceBuffer, PinnedBuffer } = await import('../../../src/index.js');
const { openRemote, remoteStats } = await import('../../../src/remote.js');

const KiB = 1024;
const server = new RangeServer();
const data = pattern(2 * 1024 * KiB + 77, 31);
const opts = { remoteRangeSize: 64 * KiB, remoteRetryBaseMs: 1, remoteConcurrency: 4 };

before(async () => {
  await server.start();
  server.put('/object', data);
});
after(() => server.stop());

describe('remote reads into GPU memory', () => {
  it('reads a whole object through pinned staging, byte for byte, under remote-device', async () => {
    const before = remoteStats().routes['remote-device'].bytes;
    await using obj = await openRemote(server.url(), opts);
    using buf = DeviceBuffer.alloc(data.length);
    assert.equal(await obj.read(buf), data.length);
    assert.ok((await buf.toBuffer()).equals(data));
    const s = obj.stats().routes['remote-device'];
    assert.equal(s.operations, 1);
    assert.equal(s.bytes, data.length);
    assert.equal(s.requests, Math.ceil(data.length / (64 * KiB)));
    assert.equal(obj.stats().routes['remote-host'].operations, 0);
    assert.equal(remoteStats().routes['remote-device'].bytes - before, data.length);
    // Slots: the concurrency and four more at most, each one range.
    assert.ok(obj.stagingBytes > 0 && obj.stagingBytes <= 8 * 64 * KiB);
    await obj.close();
    assert.equal(obj.stagingBytes, 0);
  });

  it('reads at offsets into a device buffer and leaves its other bytes alone', async () => {
    await using obj = await openRemote(server.url(), opts);
    using buf = DeviceBuffer.alloc(400 * KiB);
    const n = await obj.read(buf, { fileOffset: 999, size: 300 * KiB, targetOffset: 4097 });
    assert.equal(n, 300 * KiB);
    const got = await buf.toBuffer();
    assert.ok(got.subarray(4097, 4097 + n).equals(data.subarray(999, 999 + n)));
    // The fake driver fills new allocations with 0xA5.
    assert.ok(got.subarray(0, 4097).every((b) => b === 0xa5));
    assert.ok(got.subarray(4097 + n).every((b) => b === 0xa5));
  });

  it('reads into pinned host memory straight, under remote-host', async () => {
    await using obj = await openRemote(server.url(), opts);
    using pinned = PinnedBuffer.alloc(data.length);
    const p = obj.read(pinned);
    assert.throws(() => pinned.free(), { code: 'ERR_PENSTOCK_BUFFER_BUSY' });
    assert.equal(await p, data.length);
    assert.ok(Buffer.from(pinned.buffer).equals(data));
    assert.equal(obj.stats().routes['remote-host'].operations, 1);
  });

  it('a failed copy to the GPU rejects the read with the CUDA error', async () => {
    await using obj = await openRemote(server.url(), opts);
    using buf = DeviceBuffer.alloc(data.length);
    await withEnv({ FAKE_CUDA_FAIL_COPY_AFTER: '3:remote' }, async () => {
      await assert.rejects(obj.read(buf), { code: 'CUDA_ERROR_ILLEGAL_ADDRESS' });
    });
    assert.equal(obj.stats().routes['remote-device'].errors, 1);
    // The staging is whole again: the next read succeeds.
    assert.equal(await obj.read(buf), data.length);
    assert.ok((await buf.toBuffer()).equals(data));
  });

  it('the device buffer cannot be freed while a read into it runs', async () => {
    await using obj = await openRemote(server.url(), opts);
    const buf = DeviceBuffer.alloc(data.length);
    const p = obj.read(buf);
    assert.throws(() => buf.free(), { code: 'ERR_PENSTOCK_BUFFER_BUSY' });
    await p;
    buf.free();
    await assert.rejects(obj.read(buf), { code: 'ERR_PENSTOCK_FREED' });
  });
});
