/**
 * Kept pages on a real GPU: a range read again is copied by the GPU straight out of the page
 * cache, byte for byte the file's, and a change to the file is seen. Without a GPU they skip
 * with the reason; `npm run test:gpu` (PENSTOCK_REQUIRE_GPU=1) makes that a failure instead.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, test } from 'node:test';
import { DeviceBuffer, open } from '../../src/index.js';
import { native } from '../../src/addon/binding.js';
import { KEPT_SETTLE_MS } from '../../src/engine/kept-pages.js';
import { makeFile, sha256 } from '../helpers.js';
import { gpuOrSkip } from './guard.js';

const MiB = 1 << 20;

describe('GPU kept pages', () => {
  test('256 MiB and 1 MiB ranges: staged, then registered, then reused, each byte-exact; a write is seen', async (t) => {
    if (!gpuOrSkip(t)) return;
    const { file, data } = makeFile(256 * MiB + 12345);
    await sleep(KEPT_SETTLE_MS + 100);
    await using f = await open(file, 'r', { compatMode: 'on' });
    using dev = DeviceBuffer.alloc(256 * MiB + 8192);
    const at = 4096 + 777;
    const size = 256 * MiB;
    const want = sha256(data.subarray(at, at + size));
    const kinds: (string | undefined)[] = [];
    for (let i = 0; i < 3; i++) {
      await dev.copyFrom(Buffer.alloc(8192, 0xee), { offset: 0 });
      const t0 = performance.now();
      const rec = await f.readRecorded(dev, { fileOffset: at, targetOffset: 4096, size });
      const ms = performance.now() - t0;
      const kept = rec.way.kind === 'kept' ? rec.way.pages : undefined;
      kinds.push(kept);
      const back = await dev.toBuffer();
      assert.equal(sha256(back.subarray(4096, 4096 + size)), want, `read ${i + 1}`);
      assert.ok(back.subarray(0, 4096).every((b) => b === 0xee), `read ${i + 1}: before the range written`);
      t.diagnostic(`read ${i + 1}: ${rec.route}${kept ? ` (${kept})` : ''}, ${(size / ms / 1e6).toFixed(1)} GB/s`);
    }
    assert.deepEqual(kinds, [undefined, 'registered', 'reused']);
    assert.ok(native().keptBytes() >= size);
    // 1 MiB, inside the kept range: read on the calling thread.
    const small = await f.readRecorded(dev, { fileOffset: at + 100 * MiB, size: MiB });
    assert.deepEqual(small.way, { kind: 'kept', pages: 'reused', onCallingThread: true });
    assert.ok((await dev.toBuffer()).subarray(0, MiB).equals(data.subarray(at + 100 * MiB, at + 101 * MiB)));
    // A write into the range: the next read is staged again, and has the new bytes.
    const fresh = Buffer.alloc(MiB, 0x3c);
    const fd = fs.openSync(file, 'r+');
    fs.writeSync(fd, fresh, 0, MiB, at + 5 * MiB);
    fs.closeSync(fd);
    const after = await f.readRecorded(dev, { fileOffset: at, targetOffset: 4096, size });
    assert.deepEqual(after.fallbacks.map((r) => r.code), ['KEPT_PAGES_STALE']);
    assert.equal(after.route, 'posix-device');
    const changed = Buffer.from(data.subarray(at, at + size));
    fresh.copy(changed, 5 * MiB);
    assert.equal(sha256((await dev.toBuffer()).subarray(4096, 4096 + size)), sha256(changed));
    await f.close();
    assert.equal(native().keptBytes(), 0);
  });
});
