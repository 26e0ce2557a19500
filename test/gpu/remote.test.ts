/**
 * Remote reads into a real GPU from the loopback range server: a whole checkpoint-sized object
 * (PENSTOCK_REMOTE_CHECKPOINT, a file such as model.safetensors, or 1 GiB of random bytes)
 * served over HTTP and read into GPU memory, verified byte for byte against the file. Without a
 * GPU it skips with the reason; `npm run test:gpu` makes that a failure.
 */
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import { describe, test } from 'node:test';
import { DeviceBuffer, openRemote } from '../../src/index.js';
import { RangeServer } from '../remote-range-server.js';
import { gpuOrSkip } from './guard.js';


describe('GPU: remote reads', () => {
  test('a checkpoint from the loopback range server into GPU memory matches the file', async (t) => {
    if (!gpuOrSkip(t)) return;
    const file = process.env.PENSTOCK_REMOTE_CHECKPOINT;
    const data = file ? fs.readFileSync(file) : crypto.randomBytes(1 << 30);
    const server = await new RangeServer().start();
    try {
      server.put('/model.safetensors', data);
      await using obj = await openRemote(server.url('/model.safetensors'));
      assert.equal(await obj.size(), data.length);
      using buf = DeviceBuffer.alloc(data.length);
      const t0 = performance.now();
      assert.equal(await obj.read(buf), data.length);
      const s = (performance.now() - t0) / 1e3;
      t.diagnostic(`${file ?? '1 GiB of random bytes'}: ${(data.length / s / 1e9).toFixed(2)} GB/s into GPU memory (first read, server in this process)`);
      const back = await buf.toBuffer();
      assert.equal(crypto.createHash('sha256').update(back).digest('hex'), crypto.createHash('sha256').update(data).digest('hex'));
      const r = obj.stats().routes['remote-device'];
      assert.equal(r.bytes, data.length);
      assert.equal(r.retries, 0);
    } finally {
      await server.stop();
    }
  });
});
