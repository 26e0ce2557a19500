/** Remote reads into host memory against the tests' own range server: bytes, ranges, pooling, stats. */
import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, it } from 'node:test';
import fs from 'node:fs';
import { openRemote, openSource, remoteStats, resetRemoteStats } from '../../../src/remote.js';
import { newPath, pattern } from '../../helpers.js';
import { RangeServer } from '../../remote-range-server.js';

const KiB = 1024;
const server = new RangeServer();
const data = pattern(3 * 1024 * KiB + 123, 7);
const fast = { remoteRangeSize: 64 * KiB, remoteRetryBaseMs: 1 };

before(async () => {
  await server.start();
  server.put('/object', data);
  server.put('/empty', Buffer.alloc(0));
});
after(() => server.stop());
beforeEach(() => server.reset());

describe('remote reads into host memory', () => {
  it('reads a whole object in parallel ranges, byte for byte', async () => {
    await using obj = await openRemote(server.url(), fast);
    assert.equal(await obj.size(), data.length);
    const out = Buffer.alloc(data.length);
    assert.equal(await obj.read(out), data.length);
    assert.ok(out.equals(data));
    const gets = server.requests.filter((r) => r.method === 'GET' && r.range !== 'bytes=0-0');
    assert.equal(gets.length, Math.ceil(data.length / (64 * KiB)));
    // Never a suffix or open-ended range (servers such as s3rver get those wrong).
    assert.ok(server.requests.every((r) => r.range === undefined || /^bytes=\d+-\d+$/.test(r.range)));
  });

  it('reads at a file offset into a target offset and leaves the rest untouched', async () => {
    await using obj = await openRemote(server.url(), fast);
    const out = Buffer.alloc(300 * KiB, 0xee);
    const n = await obj.read(out, { fileOffset: 12345, size: 200 * KiB, targetOffset: 1000 });
    assert.equal(n, 200 * KiB);
    assert.ok(out.subarray(1000, 1000 + n).equals(data.subarray(12345, 12345 + n)));
    assert.ok(out.subarray(0, 1000).every((b) => b === 0xee));
    assert.ok(out.subarray(1000 + n).every((b) => b === 0xee));
  });

  it('stops at the end of the object, like a file', async () => {
    await using obj = await openRemote(server.url(), fast);
    const out = new Uint8Array(100 * KiB).fill(0xee);
    const n = await obj.read(out, { fileOffset: data.length - 1000 });
    assert.equal(n, 1000);
    assert.ok(Buffer.from(out.subarray(0, 1000)).equals(data.subarray(data.length - 1000)));
    assert.ok(out.subarray(1000).every((b) => b === 0xee));
    assert.equal(await obj.read(out, { fileOffset: data.length + 5 }), 0);
  });

  it('reads into an ArrayBuffer and a DataView', async () => {
    await using obj = await openRemote(server.url(), fast);
    const ab = new ArrayBuffer(70 * KiB);
    assert.equal(await obj.read(ab, { fileOffset: 5 }), 70 * KiB);
    assert.ok(Buffer.from(ab).equals(data.subarray(5, 5 + 70 * KiB)));
    const dv = new DataView(new ArrayBuffer(10), 2, 8);
    assert.equal(await obj.read(dv, { fileOffset: 100 }), 8);
    assert.ok(Buffer.from(dv.buffer, 2, 8).equals(data.subarray(100, 108)));
  });

  it('finds the size of an empty object and reads nothing from it', async () => {
    await using obj = await openRemote(server.url('/empty'), fast);
    assert.equal(await obj.size(), 0);
    assert.equal(await obj.read(Buffer.alloc(10)), 0);
  });

  it('finds the size with a 1-byte ranged GET, never HEAD (presigned URLs refuse HEAD)', async () => {
    await using obj = await openRemote(`${server.url()}?X-Amz-Signature=abc&X-Amz-Credential=AKIDEXAMPLE`, fast);
    assert.equal(obj.info.sizeFrom, 'range-probe');
    assert.equal(obj.info.signed, true);
    assert.deepEqual(server.requests.map((r) => [r.method, r.range]), [['GET', 'bytes=0-0']]);
    assert.ok(!obj.name.includes('AKIDEXAMPLE') && !obj.name.includes('abc'));
  });

  it('keeps at most remoteConcurrency requests in flight, on connections kept alive', async () => {
    const before = server.connections;
    await using obj = await openRemote(server.url(), { ...fast, remoteRangeSize: 64 * KiB, remoteConcurrency: 3 });
    const out = Buffer.alloc(data.length);
    await obj.read(out);
    await obj.read(out);
    assert.ok(out.equals(data));
    const opened = server.connections - before;
    assert.ok(opened <= 3, `opened ${opened} connections for a cap of 3`);
    assert.ok(server.requests.length > 2 * opened, 'connections were reused');
  });

  it('counts requests, bytes and seconds per source and process-wide under remote-host', async () => {
    resetRemoteStats();
    await using obj = await openRemote(server.url(), fast);
    const out = Buffer.alloc(256 * KiB);
    await obj.read(out);
    const s = obj.stats().routes['remote-host'];
    assert.equal(s.operations, 1);
    assert.equal(s.requests, 4);
    assert.equal(s.retries, 0);
    assert.equal(s.bytes, 256 * KiB);
    assert.ok(s.seconds > 0);
    assert.equal(obj.stats().routes['remote-device'].operations, 0);
    const g = remoteStats();
    assert.equal(g.routes['remote-host'].bytes, 256 * KiB);
    assert.equal(g.probeRequests, 1);
  });

  it('reports progress, ending with the bytes read', async () => {
    await using obj = await openRemote(server.url(), fast);
    const seen: number[] = [];
    const n = await obj.read(Buffer.alloc(data.length), { onProgress: (b) => seen.push(b) });
    assert.ok(seen.length >= 1);
    assert.equal(seen.at(-1), n);
    for (let i = 1; i < seen.length; i++) assert.ok(seen[i]! >= seen[i - 1]!);
  });

  it('rejects bad arguments with typed errors before any request', async () => {
    await using obj = await openRemote(server.url(), fast);
    server.reset();
    await assert.rejects(obj.read(Buffer.alloc(10), { size: 11 }), { code: 'ERR_PENSTOCK_OUT_OF_RANGE' });
    await assert.rejects(obj.read(Buffer.alloc(10), { fileOffset: -1 }), { code: 'ERR_PENSTOCK_INVALID_ARGUMENT' });
    await assert.rejects(obj.read('nope' as unknown as Buffer), { code: 'ERR_PENSTOCK_INVALID_BUFFER' });
    assert.equal(server.requests.length, 0);
    await obj.close();
    await assert.rejects(obj.read(Buffer.alloc(10)), { code: 'ERR_PENSTOCK_REMOTE_CLOSED' });
  });

  it('rejects bad addresses and settings', async () => {
    await assert.rejects(openRemote('ftp://x/y'), { code: 'ERR_PENSTOCK_REMOTE_INVALID_URL' });
    await assert.rejects(openRemote('s3://bucket'), { code: 'ERR_PENSTOCK_REMOTE_INVALID_URL' });
    await assert.rejects(openRemote(server.url(), { remoteConcurrency: 0 }), { code: 'ERR_PENSTOCK_INVALID_SETTING' });
    await assert.rejects(openRemote(server.url(), { remoteRangeSize: 10 }), { code: 'ERR_PENSTOCK_INVALID_SETTING' });
  });

  it('serves two reads of one object at once, each byte for byte', async () => {
    await using obj = await openRemote(server.url(), { ...fast, remoteConcurrency: 2 });
    const a = Buffer.alloc(data.length);
    const b = Buffer.alloc(1000 * KiB);
    const [na, nb] = await Promise.all([obj.read(a), obj.read(b, { fileOffset: 777 })]);
    assert.equal(na, data.length);
    assert.equal(nb, b.length);
    assert.ok(a.equals(data));
    assert.ok(b.equals(data.subarray(777, 777 + b.length)));
  });

  it('openSource opens a URL remotely and a path as a file, with the same read surface', async () => {
    const file = newPath('source');
    fs.writeFileSync(file, data);
    for (const where of [server.url(), file]) {
      const src = await openSource(where, fast);
      try {
        assert.equal(await src.size(), data.length);
        const out = Buffer.alloc(4096);
        assert.equal(await src.read(out, { fileOffset: 100 }), 4096);
        assert.ok(out.equals(data.subarray(100, 4196)), where);
      } finally {
        await src.close();
      }
    }
  });

  it('answers 404 with a typed error', async () => {
    await assert.rejects(openRemote(server.url('/missing'), fast), { code: 'ERR_PENSTOCK_REMOTE_NOT_FOUND', status: 404 });
  });
});
