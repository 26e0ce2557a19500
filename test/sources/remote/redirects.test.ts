/**
 * Redirects of http(s):// objects, with servers on 127.0.0.1: followed once at open (at most 10,
 * as fetch does), every range then read from the final address; the caller's headers and the
 * URL's Basic authentication go to the origin named only; loops and chains too long end in a
 * typed error; signed requests (presigned URLs, s3://) are never followed, with the reason.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { after, before, beforeEach, describe, it } from 'node:test';
import { loadTensors, RemoteError } from '../../../src/index.js';
import { openRemote, openSource } from '../../../src/remote.js';
import { pattern, repoRoot, tmpDir } from '../../helpers.js';
import { RangeServer } from '../../remote-range-server.js';
import { writeSharded } from '../../tensor-writer.js';

const KiB = 1024;
const opts = { remoteRangeSize: 64 * KiB, remoteRetryBaseMs: 1, remoteRetries: 1, remoteConcurrency: 2, remoteWorkers: 0 as const };
const data = pattern(300 * KiB, 21);

/** A server that only redirects: `routes` maps a path to [status, Location]. */
class Redirector {
  readonly seen: { path: string; headers: http.IncomingHttpHeaders }[] = [];
  readonly routes = new Map<string, [number, string]>();
  readonly #server = http.createServer((req, res) => {
    const p = req.url ?? '/';
    this.seen.push({ path: p, headers: req.headers });
    const r = this.routes.get(p.replace(/\?.*$/s, ''));
    if (!r) {
      res.writeHead(404);
      return void res.end();
    }
    res.writeHead(r[0], { Location: r[1] });
    res.end('moved');
  });
  port = 0;
  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.#server.listen(0, '127.0.0.1', resolve));
    this.port = (this.#server.address() as AddressInfo).port;
    return this;
  }
  url(p: string): string {
    return `http://127.0.0.1:${this.port}${p}`;
  }
  stop(): Promise<void> {
    this.#server.closeAllConnections();
    return new Promise((resolve) => this.#server.close(() => resolve()));
  }
}

const cdn = new RangeServer();
const front = new Redirector();
before(async () => {
  await cdn.start();
  await front.start();
  cdn.put('/blob/object', data);
});
after(async () => {
  await cdn.stop();
  await front.stop();
});
beforeEach(() => {
  cdn.requests.length = 0;
  front.seen.length = 0;
  front.routes.clear();
});

describe('plain http(s):// redirects are followed', () => {
  for (const status of [301, 302, 303, 307, 308]) {
    it(`${status} to another origin: bytes read from the final address, the caller's headers not sent there`, async () => {
      front.routes.set('/model', [status, cdn.url('/blob/object?signed=1')]);
      await using obj = await openRemote(front.url('/model'), { ...opts, headers: { Authorization: 'Bearer t0ken', 'X-Api-Key': 'k3y' } });
      const out = Buffer.alloc(data.length);
      assert.equal(await obj.read(out), data.length);
      assert.ok(out.equals(data));
      assert.equal(obj.info.redirects, 1);
      assert.equal(obj.info.url, cdn.url('/blob/object?…'));
      assert.equal(obj.name, front.url('/model'));
      // One request at the front (the probe), every range at the CDN, none with the caller's headers.
      assert.equal(front.seen.length, 1);
      assert.equal(front.seen[0]!.headers.authorization, 'Bearer t0ken');
      assert.ok(cdn.requests.length >= 2);
      for (const r of cdn.requests) {
        assert.equal(r.headers.authorization, undefined);
        assert.equal(r.headers['x-api-key'], undefined);
      }
    });
  }

  it('a chain of relative redirects on one origin keeps the headers', async () => {
    cdn.put('/blob/final', data);
    // The CDN serves its own bytes; the front hops twice on its own origin, then to the CDN.
    front.routes.set('/a', [302, '/b']);
    front.routes.set('/b', [307, `//127.0.0.1:${front.port}/c`]);
    front.routes.set('/c', [302, cdn.url('/blob/final')]);
    await using obj = await openRemote(front.url('/a'), { ...opts, headers: { Authorization: 'Bearer t0ken' } });
    const out = Buffer.alloc(data.length);
    assert.equal(await obj.read(out), data.length);
    assert.ok(out.equals(data));
    assert.equal(obj.info.redirects, 3);
    assert.deepEqual(front.seen.map((s) => [s.path, s.headers.authorization]), [['/a', 'Bearer t0ken'], ['/b', 'Bearer t0ken'], ['/c', 'Bearer t0ken']]);
    assert.ok(cdn.requests.every((r) => r.headers.authorization === undefined));
  });

  it('Basic authentication from the URL\'s user info is not sent to another origin', async () => {
    front.routes.set('/model', [302, cdn.url('/blob/object')]);
    await using obj = await openRemote(front.url('/model').replace('http://', 'http://bob:hunter2@'), opts);
    assert.equal(await obj.size(), data.length);
    assert.equal(front.seen[0]!.headers.authorization, `Basic ${Buffer.from('bob:hunter2').toString('base64')}`);
    assert.ok(cdn.requests.every((r) => r.headers.authorization === undefined));
    assert.doesNotMatch(JSON.stringify(obj.info) + obj.name, /hunter2|bob/);
  });

  it('ten redirects are followed, the eleventh is ERR_PENSTOCK_REMOTE_REDIRECT', async () => {
    for (let i = 0; i < 10; i++) front.routes.set(`/r${i}`, [302, `/r${i + 1}`]);
    front.routes.set('/r10', [302, cdn.url('/blob/object')]);
    await assert.rejects(openRemote(front.url('/r0'), opts), (e: RemoteError) => {
      assert.equal(e.code, 'ERR_PENSTOCK_REMOTE_REDIRECT');
      assert.match(e.message, /More than 10 redirects/);
      return true;
    });
    front.seen.length = 0;
    await using obj = await openRemote(front.url('/r1'), opts);
    assert.equal(obj.info.redirects, 10);
    assert.equal(await obj.size(), data.length);
  });

  it('a loop ends in ERR_PENSTOCK_REMOTE_REDIRECT', async () => {
    front.routes.set('/loop', [302, '/loop']);
    await assert.rejects(openRemote(front.url('/loop'), opts), { code: 'ERR_PENSTOCK_REMOTE_REDIRECT' });
    assert.equal(front.seen.length, 11);
  });

  it('http:// to https:// is followed, and the ranges read over TLS, from worker threads too', async () => {
    const tlsDir = path.join(repoRoot, 'test/fixtures/tls');
    const cert = fs.readFileSync(path.join(tlsDir, 'cert.pem'), 'utf8');
    const secure = await new RangeServer({ tls: { key: fs.readFileSync(path.join(tlsDir, 'key.pem'), 'utf8'), cert } }).start();
    try {
      secure.put('/object', data);
      front.routes.set('/upgrade', [301, secure.url('/object')]);
      for (const remoteWorkers of [0, 2]) {
        await using obj = await openRemote(front.url('/upgrade'), { ...opts, remoteWorkers, ca: cert, headers: { Authorization: 'Bearer t0ken' } });
        const out = remoteWorkers ? new Uint8Array(new SharedArrayBuffer(data.length)) : Buffer.alloc(data.length);
        assert.equal(await obj.read(out), data.length);
        assert.ok(Buffer.from(out.buffer, out.byteOffset, out.length).equals(data));
      }
      assert.ok(secure.requests.length > 2 && secure.requests.every((r) => r.headers.authorization === undefined));
    } finally {
      await secure.stop();
    }
  });

  it('a redirect to another scheme is refused', async () => {
    front.routes.set('/file', [302, 'file:///etc/passwd']);
    await assert.rejects(openRemote(front.url('/file'), opts), (e: RemoteError) => e.code === 'ERR_PENSTOCK_REMOTE_REDIRECT' && /file:/.test(e.message));
  });

  it('a sharded checkpoint whose index and shards each redirect loads', async () => {
    const d = path.join(tmpDir(), 'redirected-ckpt');
    const w = writeSharded(d, [
      { name: 'x', dtype: 'F32', shape: [128] },
      { name: 'y', dtype: 'F16', shape: [16, 4] },
    ], 2);
    for (const f of [w.index, ...w.files]) {
      cdn.put(`/lfs/${path.basename(f)}`, fs.readFileSync(f));
      front.routes.set(`/org/model/resolve/main/${path.basename(f)}`, [302, cdn.url(`/lfs/${path.basename(f)}?X-Sig=1`)]);
    }
    const set = await loadTensors(front.url('/org/model/resolve/main/model.safetensors.index.json'), {
      host: true, openSource: (l) => openSource(l, { ...opts, headers: { Authorization: 'Bearer t0ken' } }),
    });
    try {
      for (const t of w.tensors) assert.ok(Buffer.from(set.get(t.name)!.data as Uint8Array).equals(t.data), t.name);
      assert.ok(cdn.requests.every((r) => r.headers.authorization === undefined));
    } finally {
      set.free();
    }
  });
});

describe('signed requests are not redirected', () => {
  it('a presigned URL\'s redirect is ERR_PENSTOCK_REMOTE_REDIRECT with the reason, and not followed', async () => {
    front.routes.set('/signed', [307, cdn.url('/blob/object')]);
    await assert.rejects(openRemote(`${front.url('/signed')}?X-Amz-Signature=abc&X-Amz-Credential=k`, opts), (e: RemoteError) => {
      assert.equal(e.code, 'ERR_PENSTOCK_REMOTE_REDIRECT');
      assert.match(e.message, /not followed: a presigned URL is signed for its own address/);
      return true;
    });
    assert.equal(cdn.requests.length, 0);
  });

  it('a signed s3:// request\'s redirect is ERR_PENSTOCK_REMOTE_REDIRECT with the reason, and not followed', async () => {
    front.routes.set('/bucket/key', [307, cdn.url('/blob/object')]);
    const s3 = { endpoint: front.url(''), region: 'us-east-1', credentials: { accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'wJalrXUtnFEMI' } };
    await assert.rejects(openRemote('s3://bucket/key', { ...opts, ...s3 }), (e: RemoteError) => {
      assert.equal(e.code, 'ERR_PENSTOCK_REMOTE_REDIRECT');
      assert.match(e.message, /not followed: the request is signed/);
      return true;
    });
    assert.equal(cdn.requests.length, 0);
  });

  it('a range that redirects after the open is refused, not followed', async () => {
    cdn.put('/blob/moving', data);
    await using obj = await openRemote(cdn.url('/blob/moving'), opts);
    cdn.inject({ kind: 'status', status: 302, headers: { location: front.url('/elsewhere') } }, { method: 'GET', path: '/blob/moving', times: Infinity });
    await assert.rejects(obj.read(Buffer.alloc(data.length)), (e: RemoteError) => e.code === 'ERR_PENSTOCK_REMOTE_REDIRECT' && /not followed/.test(e.message));
    assert.equal(front.seen.length, 0);
  });
});
