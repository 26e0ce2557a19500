/**
 * penstock's HTTP/1.1 client on the wire, against a server that writes its answers byte for byte
 * as each test scripts them: heads split across reads, chunked bodies, interim 1xx answers,
 * HTTP/1.0, `Connection: close`, bytes after an answer, malformed answers, and header values that
 * must not be sent.
 */
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, beforeEach, describe, it } from 'node:test';
import { RemoteError } from '../../../src/index.js';
import { openRemote } from '../../../src/remote.js';
import { pattern } from '../../helpers.js';

interface Seen {
  method: string;
  path: string;
  range?: string;
  headers: Map<string, string>;
  /** Which connection (1-based, in order of acceptance) carried it. */
  connection: number;
}

/** Written as a piece of an answer: the server ends the connection there. */
const END = Symbol('end');

/**
 * The answer to one request: pieces written one by one (each its own write, a pause between), or
 * 'hang-up': the connection is destroyed without an answer.
 */
type Script = (req: Seen, n: number) => (string | Buffer | typeof END)[] | 'hang-up';

const data = pattern(300_000, 17);
let script: Script = () => [];
const seen: Seen[] = [];
let connections = 0;
/** Most connections open at once. */
let peak = 0;
const sockets = new Set<net.Socket>();

const server = net.createServer((socket) => {
  const connection = ++connections;
  sockets.add(socket);
  peak = Math.max(peak, sockets.size);
  socket.setNoDelay(true);
  socket.on('close', () => sockets.delete(socket));
  socket.on('error', () => undefined);
  let pending = '';
  let queue = Promise.resolve();
  socket.on('data', (d: Buffer) => {
    pending += d.toString('latin1');
    for (let end = pending.indexOf('\r\n\r\n'); end >= 0; end = pending.indexOf('\r\n\r\n')) {
      const [line, ...fields] = pending.slice(0, end).split('\r\n');
      pending = pending.slice(end + 4);
      const [method, path] = line!.split(' ');
      const headers = new Map(fields.map((f) => [f.slice(0, f.indexOf(':')).toLowerCase(), f.slice(f.indexOf(':') + 1).trim()]));
      const req: Seen = { method: method!, path: path!, headers, connection, ...(headers.has('range') ? { range: headers.get('range')! } : {}) };
      seen.push(req);
      const answer = script(req, seen.length);
      queue = queue.then(async () => {
        if (answer === 'hang-up') return void socket.destroy();
        for (const piece of answer) {
          if (socket.destroyed) return;
          if (piece === END) return void socket.end();
          socket.write(piece);
          await new Promise((r) => setTimeout(r, 1));
        }
      });
    }
  });
});

let url = '';
before(async () => {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}/object`;
});
after(async () => {
  for (const s of sockets) s.destroy();
  await new Promise((r) => server.close(r));
});
beforeEach(() => {
  seen.length = 0;
  script = () => [];
});

/** `[first, last]` of a request's Range header. */
function rangeOf(req: Seen): [number, number] {
  const m = /^bytes=(\d+)-(\d+)$/.exec(req.range ?? '');
  assert.ok(m, `a range request, got ${req.range}`);
  return [Number(m[1]), Number(m[2])];
}

/** A plain, correct 206 for the range asked for, with Content-Length. */
function partial(req: Seen, extra = ''): [string, Buffer] {
  const [first, last] = rangeOf(req);
  const body = data.subarray(first, last + 1);
  return [`HTTP/1.1 206 Partial Content\r\nContent-Range: bytes ${first}-${last}/${data.length}\r\nContent-Length: ${body.length}\r\nETag: "v1"\r\n${extra}\r\n`, body];
}

const opts = { remoteRangeSize: 64 * 1024, remoteConcurrency: 1, remoteRetries: 2, remoteRetryBaseMs: 1 };

async function readAll(o: object = {}): Promise<Buffer> {
  await using obj = await openRemote(url, { ...opts, ...o });
  const out = Buffer.alloc(data.length);
  assert.equal(await obj.read(out), data.length);
  return out;
}

describe('the HTTP/1.1 client', () => {
  it('reads heads split byte by byte and keeps one connection for every request', async () => {
    script = (req) => {
      const [head, body] = partial(req);
      return [...head.split(''), body];
    };
    assert.ok((await readAll()).equals(data));
    assert.equal(new Set(seen.map((r) => r.connection)).size, 1);
    assert.equal(seen.length, 1 + Math.ceil(data.length / (64 * 1024)));
    assert.ok(seen.every((r) => r.headers.get('host') === new URL(url).host && r.method === 'GET'));
  });

  it('decodes chunked bodies (extensions, trailers, chunks split across reads)', async () => {
    script = (req) => {
      const [first, last] = rangeOf(req);
      const body = data.subarray(first, last + 1);
      const pieces: (string | Buffer)[] = [`HTTP/1.1 206 Partial Content\r\nContent-Range: bytes ${first}-${last}/${data.length}\r\nTransfer-Encoding: chunked\r\nETag: "v1"\r\n\r\n`];
      for (let at = 0; at < body.length; at += 10_000) {
        const c = body.subarray(at, at + 10_000);
        pieces.push(`${c.length.toString(16)};name=value\r\n`, c.subarray(0, 77), Buffer.concat([c.subarray(77), Buffer.from('\r\n')]));
      }
      pieces.push('0\r\nX-Trailer: yes\r\n', '\r\n');
      return pieces;
    };
    assert.ok((await readAll()).equals(data));
    // The size probe's answer, of a length not told, was dropped with its connection; the ranges
    // after it shared the next one.
    assert.equal(new Set(seen.slice(1).map((r) => r.connection)).size, 1);
  });

  it('skips interim 1xx answers', async () => {
    script = (req) => ['HTTP/1.1 100 Continue\r\n\r\n', ...partial(req)];
    assert.ok((await readAll()).equals(data));
  });

  it('opens a new connection after HTTP/1.0 and after Connection: close', async () => {
    script = (req) => {
      const [head, body] = partial(req);
      return [head.replace('HTTP/1.1', 'HTTP/1.0'), body];
    };
    const before = connections;
    assert.ok((await readAll()).equals(data));
    assert.equal(connections - before, seen.length);
    seen.length = 0;
    script = (req) => partial(req, 'Connection: close\r\n');
    const again = connections;
    assert.ok((await readAll()).equals(data));
    assert.equal(connections - again, seen.length);
  });

  it('retires a connection that sent bytes after its answer; the answer itself is kept', async () => {
    script = (req) => {
      const [head, body] = partial(req);
      return [Buffer.concat([Buffer.from(head), body, Buffer.from('HTTP/1.1 200 OK\r\n\r\n')])];
    };
    const before = connections;
    assert.ok((await readAll()).equals(data));
    assert.equal(connections - before, seen.length);
  });

  it('takes a body that ends with the connection', async () => {
    // Neither Content-Length nor chunks: the body runs until the server closes the connection.
    script = (req) => {
      const [first, last] = rangeOf(req);
      return [`HTTP/1.1 206 Partial Content\r\nContent-Range: bytes ${first}-${last}/${data.length}\r\nETag: "v1"\r\n\r\n`, data.subarray(first, last + 1), END];
    };
    const before = connections;
    assert.ok((await readAll()).equals(data));
    assert.equal(connections - before, seen.length);
  });

  it('an answer that is not HTTP/1.1 is a connection error, retried, then reported', async () => {
    script = (req, n) => (n === 1 ? partial(req) : ['SSH-2.0-OpenSSH_9.0\r\n\r\n']);
    await assert.rejects(readAll(), (e: RemoteError) => {
      assert.equal(e.code, 'ERR_PENSTOCK_REMOTE_CONNECTION');
      assert.match(e.message, /not valid HTTP\/1\.1/);
      assert.equal(e.attempts, 3);
      return true;
    });
  });

  it('refuses a head larger than 64 KiB', async () => {
    script = (req, n) => (n === 1 ? partial(req) : [`HTTP/1.1 206 Partial Content\r\nX-Big: ${'a'.repeat(70_000)}\r\n\r\n`]);
    await assert.rejects(readAll({ remoteRetries: 0 }), { code: 'ERR_PENSTOCK_REMOTE_CONNECTION', message: /longer than 65536 bytes/ });
  });

  it('reads the S3 error code from a chunked error body', async () => {
    const chunk = (text: string) => `${text.length.toString(16)}\r\n${text}\r\n`;
    script = () => ['HTTP/1.1 403 Forbidden\r\nTransfer-Encoding: chunked\r\n\r\n', chunk('<Error><Code>Access'), chunk('Denied</Code></Error>'), '0\r\n\r\n'];
    await assert.rejects(readAll(), { code: 'ERR_PENSTOCK_REMOTE_ACCESS_DENIED', serverCode: 'AccessDenied', status: 403 });
  });

  it('a connection closed before an answer is retried on a new one', async () => {
    script = (req, n) => (n === 2 ? 'hang-up' : partial(req));
    await using obj = await openRemote(url, opts);
    const out = Buffer.alloc(data.length);
    assert.equal(await obj.read(out), data.length);
    assert.ok(out.equals(data));
    assert.equal(obj.stats().routes['remote-host'].retries, 1);
  });

  it('reads sharing an object wait for its connections, within the cap', async () => {
    script = (req) => partial(req);
    // Connections of the earlier tests' objects (closed by now) gone first, so only this one's count.
    for (let i = 0; i < 100 && sockets.size > 0; i++) await new Promise((r) => setTimeout(r, 10));
    peak = 0;
    await using obj = await openRemote(url, { ...opts, remoteConcurrency: 2 });
    const a = Buffer.alloc(data.length);
    const b = Buffer.alloc(data.length);
    assert.deepEqual(await Promise.all([obj.read(a), obj.read(b), obj.read(Buffer.alloc(10))]), [data.length, data.length, 10]);
    assert.ok(a.equals(data) && b.equals(data));
    assert.ok(peak <= 2, `${peak} connections open at once for a cap of 2`);
  });

  it('a read cancelled while it waits for a connection leaves the others whole', async () => {
    script = (req) => partial(req);
    await using obj = await openRemote(url, { ...opts, remoteConcurrency: 2 });
    const a = Buffer.alloc(data.length);
    const ac = new AbortController();
    const pa = obj.read(a);
    const pb = obj.read(Buffer.alloc(data.length), { signal: ac.signal });
    // While the first read holds both connections, the second's requests wait for one.
    setTimeout(() => ac.abort(), 5);
    await assert.rejects(pb, { name: 'AbortError' });
    assert.equal(await pa, data.length);
    assert.ok(a.equals(data));
    a.fill(0);
    assert.equal(await obj.read(a), data.length);
    assert.ok(a.equals(data));
  });

  it('refuses header names and values that would change the request, before sending anything', async () => {
    const refused: Record<string, string>[] = [{ 'X-A': 'ok\r\nX-Injected: 1' }, { 'Bad Name': 'x' }, { 'X-Null': 'a\0b' }];
    for (const headers of refused) {
      await assert.rejects(openRemote(url, { ...opts, headers }), { code: 'ERR_PENSTOCK_INVALID_ARGUMENT' });
    }
    assert.equal(seen.length, 0);
  });
});
