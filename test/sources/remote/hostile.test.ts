/**
 * Hostile servers on 127.0.0.1: answers that are encoded, of another version without saying so,
 * with headers no client can send back, with sizes past 2^53, bodies that never end or trickle.
 * Every one is a typed error or the right bytes, never wrong bytes, a TypeError or a hang.
 */
import assert from 'node:assert/strict';
import zlib from 'node:zlib';
import { after, describe, it } from 'node:test';
import { loadTensors, RemoteError } from '../../../src/index.js';
import { openRemote } from '../../../src/remote.js';
import { pattern } from '../../helpers.js';
import { partialHead, rangeOf, RawServer, type RawHandler } from './raw-http-server.js';

const KiB = 1024;
const opts = { remoteRangeSize: 64 * KiB, remoteRetryBaseMs: 1, remoteRetries: 2, remoteConcurrency: 2, remoteWorkers: 0 };
const servers: RawServer[] = [];
after(() => Promise.all(servers.map((s) => s.stop())));

async function serve(handler: RawHandler): Promise<RawServer> {
  const s = await new RawServer(handler).start();
  servers.push(s);
  return s;
}

/** Answers ranges of `data` with the given extra header lines (by request number, from 0). */
function ranges(data: Buffer, extra: (n: number) => string[] = () => ['ETag: "v1"']): RawHandler {
  let n = 0;
  return (req, socket) => {
    const { first, last } = rangeOf(req, data.length);
    socket.write(partialHead(first, last, data.length, extra(n++)));
    socket.write(data.subarray(first, last + 1));
  };
}

describe('encoded answers', () => {
  it('asks for identity, and refuses a gzip answer with ERR_PENSTOCK_REMOTE_ENCODED', async () => {
    const data = pattern(100 * KiB, 3);
    const gz = zlib.gzipSync(data);
    const s = await serve(ranges(gz, () => ['ETag: "g"', 'Content-Encoding: gzip']));
    await assert.rejects(openRemote(s.url(), { ...opts, headers: { 'accept-encoding': 'gzip' } }), { code: 'ERR_PENSTOCK_REMOTE_ENCODED' });
    assert.equal(s.requests[0]!.headers['accept-encoding'], 'identity');
  });

  it('refuses ranged answers that are encoded although the probe was not', async () => {
    const data = pattern(100 * KiB, 4);
    const s = await serve(ranges(data, (n) => (n === 0 ? ['ETag: "v1"'] : ['ETag: "v1"', 'Content-Encoding: br'])));
    await using obj = await openRemote(s.url(), opts);
    await assert.rejects(obj.read(Buffer.alloc(data.length)), { code: 'ERR_PENSTOCK_REMOTE_ENCODED' });
  });
});

describe('an object replaced mid-read', () => {
  const v1 = pattern(200 * KiB, 5);
  const v2 = pattern(200 * KiB, 6);

  it('opened with an ETag: a later answer of another version without one is ERR_PENSTOCK_REMOTE_CHANGED', async () => {
    // Version 2 ignores If-Match and sends no ETag, only its own Last-Modified.
    let n = 0;
    const s = await serve((req, socket) => {
      const data = n++ === 0 ? v1 : v2;
      const { first, last } = rangeOf(req, data.length);
      const validators = n === 1 ? ['ETag: "v1"', 'Last-Modified: Thu, 01 Jan 2026 00:00:00 GMT'] : ['Last-Modified: Fri, 02 Jan 2026 00:00:00 GMT'];
      socket.write(partialHead(first, last, data.length, validators));
      socket.write(data.subarray(first, last + 1));
    });
    await using obj = await openRemote(s.url(), opts);
    await assert.rejects(obj.read(Buffer.alloc(v1.length)), { code: 'ERR_PENSTOCK_REMOTE_CHANGED' });
  });

  it('opened with Last-Modified only: an answer without it is ERR_PENSTOCK_REMOTE_CHANGED', async () => {
    let n = 0;
    const s = await serve((req, socket) => {
      const data = n++ === 0 ? v1 : v2;
      const { first, last } = rangeOf(req, data.length);
      socket.write(partialHead(first, last, data.length, n === 1 ? ['Last-Modified: Thu, 01 Jan 2026 00:00:00 GMT'] : []));
      socket.write(data.subarray(first, last + 1));
    });
    await using obj = await openRemote(s.url(), opts);
    await assert.rejects(obj.read(Buffer.alloc(v1.length)), { code: 'ERR_PENSTOCK_REMOTE_CHANGED' });
  });

  it('the same holds for reads made by worker threads', async () => {
    let n = 0;
    const s = await serve((req, socket) => {
      const data = n++ === 0 ? v1 : v2;
      const { first, last } = rangeOf(req, data.length);
      socket.write(partialHead(first, last, data.length, n === 1 ? ['ETag: "v1"'] : []));
      socket.write(data.subarray(first, last + 1));
    });
    await using obj = await openRemote(s.url(), { ...opts, remoteWorkers: 2 });
    await assert.rejects(obj.read(new Uint8Array(new SharedArrayBuffer(v1.length))), { code: 'ERR_PENSTOCK_REMOTE_CHANGED' });
  });

  it('a same-version answer with the same ETag reads the right bytes', async () => {
    const s = await serve(ranges(v1));
    await using obj = await openRemote(s.url(), opts);
    const out = Buffer.alloc(v1.length);
    assert.equal(await obj.read(out), v1.length);
    assert.ok(out.equals(v1));
  });
});

describe('headers penstock cannot use', () => {
  for (const [what, etag] of [['\\x01', '"a\x01b"'], ['DEL', '"a\x7fb"'], ['NUL', '"a\x00b"']] as const) {
    it(`an ETag holding ${what} is ERR_PENSTOCK_REMOTE_BAD_HEADER, not a TypeError`, async () => {
      const data = pattern(100 * KiB, 7);
      const s = await serve(ranges(data, () => [`ETag: ${etag}`]));
      await assert.rejects(openRemote(s.url(), opts), (e: Error) => {
        assert.ok(e instanceof RemoteError, String(e));
        assert.equal((e as RemoteError).code, 'ERR_PENSTOCK_REMOTE_BAD_HEADER');
        return true;
      });
    });
  }

  for (const total of ['100000000000000000000', '9007199254740993']) {
    it(`a size of ${total} is refused, not rounded`, async () => {
      const s = await serve((req, socket) => {
        socket.write(['HTTP/1.1 206 Partial Content', `Content-Range: bytes 0-0/${total}`, 'Content-Length: 1', 'ETag: "x"', '', 'x'].join('\r\n'));
      });
      await assert.rejects(openRemote(s.url(), opts), { code: 'ERR_PENSTOCK_REMOTE_BAD_HEADER' });
    });
  }

  it('a 416 for a range inside an object of unchanged size is ERR_PENSTOCK_REMOTE_BAD_RANGE, not a change', async () => {
    const data = pattern(100 * KiB, 8);
    let n = 0;
    const s = await serve((req, socket) => {
      if (n++ === 0) return void ranges(data)(req, socket);
      socket.write(['HTTP/1.1 416 Range Not Satisfiable', `Content-Range: bytes */${data.length}`, 'Content-Length: 0', 'ETag: "v1"', '', ''].join('\r\n'));
    });
    await using obj = await openRemote(s.url(), opts);
    await assert.rejects(obj.read(Buffer.alloc(data.length)), { code: 'ERR_PENSTOCK_REMOTE_BAD_RANGE' });
  });
});

describe('bodies that do not end', () => {
  it('a chunked answer whose last chunk never comes: the bytes are kept, no inverted range is asked for', async () => {
    const data = pattern(48 * KiB, 9);
    const s = await serve((req, socket) => {
      const { first, last } = rangeOf(req, data.length);
      if (first > last) {
        socket.write(['HTTP/1.1 416 Range Not Satisfiable', `Content-Range: bytes */${data.length}`, 'Content-Length: 0', '', ''].join('\r\n'));
        return;
      }
      const body = data.subarray(first, last + 1);
      socket.write(['HTTP/1.1 206 Partial Content', `Content-Range: bytes ${first}-${last}/${data.length}`, 'Transfer-Encoding: chunked', 'ETag: "c"', '', ''].join('\r\n'));
      // Every data byte, then nothing: the final `0` chunk is never sent.
      socket.write(`${body.length.toString(16)}\r\n`);
      socket.write(body);
      socket.write('\r\n');
    });
    await using obj = await openRemote(s.url(), { ...opts, remoteTimeoutMs: 300 });
    const out = Buffer.alloc(data.length);
    assert.equal(await obj.read(out), data.length);
    assert.ok(out.equals(data));
    for (const r of s.requests) {
      const { first, last } = rangeOf(r, Infinity);
      assert.ok(first <= last, `asked for ${r.headers.range}`);
    }
  });

  it('a body that trickles (a byte at a time) times out on its own with ERR_PENSTOCK_REMOTE_TIMEOUT', { timeout: 120_000 }, async () => {
    const data = pattern(64 * KiB, 10);
    const timers = new Set<NodeJS.Timeout>();
    const s = await serve((req, socket) => {
      const { first, last } = rangeOf(req, data.length);
      if (first === 0 && last === 0) return void ranges(data)(req, socket);
      socket.write(partialHead(first, last, data.length, ['ETag: "v1"']));
      let at = first;
      const t = setInterval(() => {
        if (socket.destroyed || at > last) {
          clearInterval(t);
          timers.delete(t);
          return;
        }
        socket.write(data.subarray(at, at + 1));
        at++;
      }, 10);
      timers.add(t);
    });
    try {
      await using obj = await openRemote(s.url(), { ...opts, remoteTimeoutMs: 300, remoteRetries: 0 });
      await assert.rejects(obj.read(Buffer.alloc(data.length)), { code: 'ERR_PENSTOCK_REMOTE_TIMEOUT' });
    } finally {
      for (const t of timers) clearInterval(t);
    }
  });
});

describe('a server that accepts and never answers', () => {
  it('openRemote and loadTensors end when their signal fires, not after timeouts and retries', { timeout: 20_000 }, async () => {
    const s = await serve(() => undefined);
    const slow = { remoteTimeoutMs: 60_000, remoteRetries: 3 };
    const ac = new AbortController();
    setTimeout(() => ac.abort(new Error('enough')), 100);
    await assert.rejects(openRemote(s.url(), { ...opts, ...slow, signal: ac.signal }), { code: 'ABORT_ERR' });
    const ac2 = new AbortController();
    setTimeout(() => ac2.abort(new Error('enough')), 100);
    // With the default settings, the probe alone would wait 30 s per attempt, six attempts.
    await assert.rejects(loadTensors(s.url('/model.safetensors'), { host: true, signal: ac2.signal }), { code: 'ABORT_ERR' });
  });
});
