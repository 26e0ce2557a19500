/** Faults of remote reads: what is retried, what is an error, and that no wrong byte is ever kept. */
import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, it } from 'node:test';
import { RemoteError } from '../../../src/index.js';
import { openRemote } from '../../../src/remote.js';
import { pattern } from '../../helpers.js';
import { RangeServer, type Fault, type InjectOptions } from '../../remote-range-server.js';

const KiB = 1024;
const server = new RangeServer();
const data = pattern(1024 * KiB, 11);
const opts = { remoteRangeSize: 64 * KiB, remoteRetryBaseMs: 1, remoteRetries: 3, remoteConcurrency: 4 };

before(async () => {
  await server.start();
});
after(() => server.stop());
// A fresh path per test: a request that a failed read of the last test left on the wire, and
// that reaches the server late, cannot take this test's fault.
let path = '/object';
let tests = 0;
beforeEach(() => {
  server.reset();
  path = `/object-${++tests}`;
  server.put(path, data);
});

function inject(fault: Fault, options: InjectOptions = {}): void {
  server.inject(fault, { ...options, path });
}

async function readAll(o: Partial<typeof opts> = {}): Promise<{ out: Buffer; n: number; retries: number }> {
  await using obj = await openRemote(server.url(path), { ...opts, ...o });
  const out = Buffer.alloc(data.length);
  const n = await obj.read(out);
  return { out, n, retries: obj.stats().routes['remote-host'].retries };
}

describe('transient faults are retried', () => {
  for (const status of [429, 500, 502, 503, 504]) {
    it(`retries ${status} and reads the right bytes`, async () => {
      inject({ kind: 'status', status }, { method: 'GET', after: 2, times: 2 });
      const r = await readAll();
      assert.ok(r.out.equals(data));
      assert.equal(r.retries, 2);
    });
  }

  it('retries connection resets', async () => {
    inject({ kind: 'reset' }, { method: 'GET', after: 3, times: 2 });
    const r = await readAll();
    assert.ok(r.out.equals(data));
    assert.equal(r.retries, 2);
  });

  it('resumes a truncated body where it stopped', async () => {
    inject({ kind: 'truncate' }, { method: 'GET', after: 1 });
    const r = await readAll({ remoteConcurrency: 1 });
    assert.ok(r.out.equals(data));
    assert.equal(r.retries, 1);
    // The first range was cut after half its bytes; its retry asks for the rest only.
    const ranges = server.requests.filter((q) => q.path === path).map((q) => q.range);
    assert.deepEqual(ranges.slice(0, 4), ['bytes=0-0', `bytes=0-${64 * KiB - 1}`, `bytes=${32 * KiB}-${64 * KiB - 1}`, `bytes=${64 * KiB}-${128 * KiB - 1}`]);
  });

  it('retries a request that stalls past the timeout', async () => {
    inject({ kind: 'stall' }, { method: 'GET', after: 1 });
    const r = await readAll({ remoteTimeoutMs: 200 } as Partial<typeof opts>);
    assert.ok(r.out.equals(data));
    assert.equal(r.retries, 1);
  });

  it('passes a Retry-After on with the error', async () => {
    inject({ kind: 'status', status: 429, headers: { 'retry-after': '0' } }, { method: 'GET', after: 1, times: Infinity });
    await assert.rejects(readAll({ remoteRetries: 1 }), { code: 'ERR_PENSTOCK_REMOTE_UNAVAILABLE', status: 429, retryAfterMs: 0, attempts: 2 });
  });

  it('gives up after remoteRetries with a typed error that counts the attempts', async () => {
    inject({ kind: 'status', status: 503, body: '<Error><Code>SlowDown</Code></Error>' }, { method: 'GET', after: 1, times: Infinity });
    await assert.rejects(readAll(), (e: RemoteError) => {
      assert.equal(e.code, 'ERR_PENSTOCK_REMOTE_UNAVAILABLE');
      assert.equal(e.status, 503);
      assert.equal(e.serverCode, 'SlowDown');
      assert.equal(e.attempts, 4);
      return true;
    });
  });

  it('a timeout on every attempt ends in ERR_PENSTOCK_REMOTE_TIMEOUT', async () => {
    inject({ kind: 'stall' }, { method: 'GET', after: 1, times: Infinity });
    await assert.rejects(readAll({ remoteTimeoutMs: 100, remoteRetries: 1 } as Partial<typeof opts>), { code: 'ERR_PENSTOCK_REMOTE_TIMEOUT', attempts: 2 });
  });

  it('a truncated body on every attempt ends in ERR_PENSTOCK_REMOTE_SHORT_BODY', async () => {
    inject({ kind: 'truncate' }, { method: 'GET', after: 1, times: Infinity });
    await assert.rejects(readAll({ remoteRetries: 1 }), { code: 'ERR_PENSTOCK_REMOTE_SHORT_BODY' });
  });
});

describe('inconsistent answers are errors, not retried', () => {
  const cases: [string, Fault, string][] = [
    ['a 200 where a range was asked for', { kind: 'ignore-range' }, 'ERR_PENSTOCK_REMOTE_RANGE_IGNORED'],
    ['a Content-Range for other bytes', { kind: 'wrong-range' }, 'ERR_PENSTOCK_REMOTE_BAD_RANGE'],
    ['no Content-Range on a 206', { kind: 'no-content-range' }, 'ERR_PENSTOCK_REMOTE_BAD_RANGE'],
    ['a Content-Length shorter than the Content-Range', { kind: 'short-length' }, 'ERR_PENSTOCK_REMOTE_BAD_RANGE'],
    ['a body longer than its Content-Range', { kind: 'long-body' }, 'ERR_PENSTOCK_REMOTE_LONG_BODY'],
  ];
  for (const [what, fault, code] of cases) {
    it(`${what} → ${code}`, async () => {
      inject(fault, { method: 'GET', after: 3 });
      await assert.rejects(readAll(), { code });
    });
  }

  it('the object overwritten mid-read → ERR_PENSTOCK_REMOTE_CHANGED (If-Match sent)', async () => {
    inject({ kind: 'overwrite', data: pattern(data.length, 99) }, { method: 'GET', after: 4 });
    await assert.rejects(readAll(), { code: 'ERR_PENSTOCK_REMOTE_CHANGED' });
    const gets = server.requests.filter((r) => r.method === 'GET' && r.path === path && r.range !== 'bytes=0-0');
    assert.ok(gets.every((r) => typeof r.headers['if-match'] === 'string'));
  });

  it('without ETags, a changed Last-Modified → ERR_PENSTOCK_REMOTE_CHANGED', async () => {
    server.sendEtag = false;
    try {
      inject({ kind: 'overwrite', data: pattern(data.length, 98) }, { method: 'GET', after: 4 });
      await assert.rejects(readAll(), { code: 'ERR_PENSTOCK_REMOTE_CHANGED' });
    } finally {
      server.sendEtag = true;
    }
  });

  it('an object that grew or shrank between open and read → ERR_PENSTOCK_REMOTE_CHANGED or BAD_RANGE', async () => {
    await using obj = await openRemote(server.url(path), opts);
    server.sendEtag = false;
    try {
      server.put(path, pattern(data.length + 10, 5));
      await assert.rejects(obj.read(Buffer.alloc(data.length)), (e: RemoteError) => ['ERR_PENSTOCK_REMOTE_CHANGED', 'ERR_PENSTOCK_REMOTE_BAD_RANGE'].includes(e.code));
    } finally {
      server.sendEtag = true;
    }
  });
});

describe('redirects and region errors say what to change', () => {
  it('301 with the bucket region names the region to use', async () => {
    inject({ kind: 'status', status: 301, headers: { 'x-amz-bucket-region': 'eu-west-2' }, body: '<Error><Code>PermanentRedirect</Code></Error>' });
    await assert.rejects(openRemote(server.url(path), opts), (e: RemoteError) => {
      assert.equal(e.code, 'ERR_PENSTOCK_REMOTE_REDIRECT');
      assert.equal(e.region, 'eu-west-2');
      assert.match(e.message, /AWS_REGION=eu-west-2/);
      return true;
    });
  });

  it('307 of a presigned URL names the new address, without its query string, and is not followed', async () => {
    inject({ kind: 'status', status: 307, headers: { location: 'http://elsewhere.example/object?X-Amz-Signature=s3cr3t' } });
    await assert.rejects(openRemote(`${server.url(path)}?X-Amz-Signature=mine`, opts), (e: RemoteError) => {
      assert.equal(e.code, 'ERR_PENSTOCK_REMOTE_REDIRECT');
      assert.match(e.message, /elsewhere\.example\/object/);
      assert.match(e.message, /not followed: a presigned URL/);
      assert.doesNotMatch(e.message, /s3cr3t|mine/);
      return true;
    });
  });

  it('AuthorizationHeaderMalformed names the region the server expects', async () => {
    inject({ kind: 'status', status: 400, body: '<Error><Code>AuthorizationHeaderMalformed</Code><Region>ap-south-1</Region></Error>' });
    await assert.rejects(openRemote(server.url(path), opts), { code: 'ERR_PENSTOCK_REMOTE_WRONG_REGION', region: 'ap-south-1' });
  });
});

describe('cancellation', () => {
  it('an AbortSignal cancels the requests in flight', async () => {
    await using obj = await openRemote(server.url(path), opts);
    inject({ kind: 'slow', ms: 300 }, { method: 'GET', times: Infinity });
    const ac = new AbortController();
    const reason = new Error('stop');
    const p = obj.read(Buffer.alloc(data.length), { signal: ac.signal });
    setTimeout(() => ac.abort(reason), 50);
    await assert.rejects(p, (e: Error & { code?: string }) => e.name === 'AbortError' && e.cause === reason);
    assert.equal(obj.stats().routes['remote-host'].errors, 1);
    await assert.rejects(obj.read(Buffer.alloc(1), { signal: AbortSignal.abort() }), { name: 'AbortError' });
  });
});

describe('no secret in errors, names or stats', () => {
  it('keeps tokens of headers and presigned URLs out of everything it reports', async () => {
    const secret = 'Zm9vYmFyc2VjcmV0dG9rZW4';
    inject({ kind: 'status', status: 403, body: `<Error><Code>AccessDenied</Code><Message>echo ${secret}</Message></Error>` }, { times: Infinity });
    const err = await openRemote(`${server.url(path)}?X-Amz-Signature=${secret}`, { ...opts, headers: { Authorization: `Bearer ${secret}` } }).catch((e: unknown) => e);
    assert.ok(err instanceof RemoteError);
    assert.equal(err.code, 'ERR_PENSTOCK_REMOTE_ACCESS_DENIED');
    const text = `${err.message} ${err.stack} ${JSON.stringify(err)} ${JSON.stringify({ ...err })}`;
    assert.ok(!text.includes(secret), text);
  });
});
