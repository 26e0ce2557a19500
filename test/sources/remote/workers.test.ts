/**
 * Remote reads with HTTP parsed in worker threads (remoteWorkers > 0), against the range server
 * and the fake driver: the same bytes, checks, retries, stats and cancellation as on the main
 * thread, into a SharedArrayBuffer and GPU memory (other host memory is written on the main
 * thread, workers or not).
 */
import { useFakeDriver, pattern, withEnv } from '../../helpers.js';
useFakeDriver();

import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, it } from 'node:test';
import { RangeServer } from '../../remote-range-server.js';
const { DeviceBuffer, RemoteError } = await import('../../../src/index.js');
const { openRemote } = await import('../../../src/remote.js');
const { runtimeInfo } = await import('../../../src/doctor.js');
const { remoteWorkerThreads } = await import('../../../src/sources/remote/parse-workers.js');

const KiB = 1024;
const server = new RangeServer();
const data = pattern(1536 * KiB + 5, 41);
const opts = { remoteWorkers: 2, remoteRangeSize: 64 * KiB, remoteConcurrency: 4, remoteRetryBaseMs: 1, remoteRetries: 2 };
let path = '/w';
let n = 0;

before(async () => {
  await server.start();
});
after(() => server.stop());
/** Host memory the workers can write into. */
const shared = (n: number) => new Uint8Array(new SharedArrayBuffer(n));

beforeEach(() => {
  server.reset();
  path = `/w-${++n}`;
  server.put(path, data);
});

describe('remote reads parsed in worker threads', () => {
  it('reads into host memory, a SharedArrayBuffer and GPU memory, byte for byte', async () => {
    await using obj = await openRemote(server.url(path), opts);
    assert.equal(obj.info.parseWorkers, 2);
    const host = Buffer.alloc(data.length + 10, 0xee);
    assert.equal(await obj.read(host, { targetOffset: 10 }), data.length);
    assert.ok(host.subarray(10).equals(data));
    assert.ok(host.subarray(0, 10).every((b) => b === 0xee));
    const sab = shared(200 * KiB);
    assert.equal(await obj.read(sab, { fileOffset: 1000 }), 200 * KiB);
    assert.ok(Buffer.from(sab).equals(data.subarray(1000, 1000 + 200 * KiB)));
    using dev = DeviceBuffer.alloc(data.length + 4096);
    assert.equal(await obj.read(dev, { targetOffset: 4096 }), data.length);
    const back = await dev.toBuffer();
    assert.ok(back.subarray(4096).equals(data));
    assert.ok(back.subarray(0, 4096).every((b) => b === 0xa5));
    const s = obj.stats().routes;
    assert.equal(s['remote-host'].operations, 2);
    assert.equal(s['remote-device'].requests, Math.ceil(data.length / (64 * KiB)));
  });

  it('retries in the worker and counts it', async () => {
    server.inject({ kind: 'status', status: 503 }, { method: 'GET', after: 3, times: 2, path });
    server.inject({ kind: 'truncate' }, { method: 'GET', after: 6, path });
    await using obj = await openRemote(server.url(path), opts);
    const out = shared(data.length);
    await obj.read(out);
    assert.ok(Buffer.from(out).equals(data));
    assert.equal(obj.stats().routes['remote-host'].retries, 3);
  });

  it('inconsistent answers come back as the same typed errors', async () => {
    await using obj = await openRemote(server.url(path), opts);
    server.inject({ kind: 'ignore-range' }, { method: 'GET', after: 2, path });
    await assert.rejects(obj.read(shared(data.length)), (e: InstanceType<typeof RemoteError>) => {
      assert.ok(e instanceof RemoteError);
      assert.equal(e.code, 'ERR_PENSTOCK_REMOTE_RANGE_IGNORED');
      assert.equal(e.status, 200);
      assert.ok(e.message.includes(path));
      return true;
    });
    server.inject({ kind: 'status', status: 503 }, { method: 'GET', times: Infinity, path });
    await assert.rejects(obj.read(shared(data.length)), { code: 'ERR_PENSTOCK_REMOTE_UNAVAILABLE', attempts: 3 });
  });

  it('a signal cancels the pieces in the workers', async () => {
    await using obj = await openRemote(server.url(path), opts);
    server.inject({ kind: 'slow', ms: 400 }, { method: 'GET', times: Infinity, path });
    const ac = new AbortController();
    const p = obj.read(shared(data.length), { signal: ac.signal });
    setTimeout(() => ac.abort(), 50);
    await assert.rejects(p, { name: 'AbortError' });
  });

  it('signs the s3:// requests made in the workers', async () => {
    server.put(`/bucket${path}`, data);
    const credentials = { accessKeyId: 'AKIDWORKER', secretAccessKey: 'not-shown-anywhere' };
    await using obj = await openRemote(`s3://bucket${path}`, { ...opts, endpoint: `http://127.0.0.1:${server.port}`, credentials });
    const out = shared(data.length);
    await obj.read(out);
    assert.ok(Buffer.from(out).equals(data));
    const gets = server.requests.filter((r) => r.method === 'GET' && r.path === `/bucket${path}`);
    assert.equal(gets.length, Math.ceil(data.length / (64 * KiB)));
    for (const g of gets) assert.match(String(g.headers.authorization), /^AWS4-HMAC-SHA256 Credential=AKIDWORKER\/\d{8}\/us-east-1\/s3\/aws4_request, SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature=[0-9a-f]{64}$/);
  });

  it('a failed copy to the GPU in a worker rejects the read with the CUDA error', async () => {
    await using obj = await openRemote(server.url(path), opts);
    using dev = DeviceBuffer.alloc(data.length);
    await withEnv({ FAKE_CUDA_FAIL_COPY_AFTER: '2:workers' }, async () => {
      await assert.rejects(obj.read(dev), { code: 'CUDA_ERROR_ILLEGAL_ADDRESS' });
    });
    assert.equal(await obj.read(dev), data.length);
    assert.ok((await dev.toBuffer()).equals(data));
  });

  it("objects share the process's workers, which forget each object (connections, pinned slots) when it closes", async () => {
    const pinnedBefore = runtimeInfo().pinnedBytes;
    const a = await openRemote(server.url(path), { ...opts, remoteWorkers: 3 });
    const b = await openRemote(server.url(path), { ...opts, remoteWorkers: 3 });
    using dev = DeviceBuffer.alloc(data.length);
    const before = server.connections;
    await Promise.all([a.read(dev), b.read(shared(data.length))]);
    assert.equal(remoteWorkerThreads(), 3);
    assert.ok((await dev.toBuffer()).equals(data));
    // Slots in the workers for a's device read.
    assert.ok(runtimeInfo().pinnedBytes > pinnedBefore);
    // Each object's connections: ceil(4 / 3) = 2 per worker, 3 workers, at most.
    assert.ok(server.connections - before <= 2 * 2 * 3, `${server.connections - before} connections`);
    await a.close();
    await b.close();
    assert.equal(runtimeInfo().pinnedBytes, pinnedBefore);
    // A later object reuses them.
    await using c = await openRemote(server.url(path), { ...opts, remoteWorkers: 2 });
    assert.equal(await c.read(dev), data.length);
    assert.equal(remoteWorkerThreads(), 3);
  });

  it('a lookup function cannot go to workers: a typed error', async () => {
    await assert.rejects(openRemote(server.url(path), { ...opts, lookup: () => undefined }), { code: 'ERR_PENSTOCK_INVALID_ARGUMENT' });
  });
});
