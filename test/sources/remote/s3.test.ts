/**
 * s3:// and presigned reads against a real S3-compatible server (@20minutes/s3rver on
 * 127.0.0.1): signing, wrong keys, addressing, credentials from the environment and the shared
 * files, presigned URLs, ranged reads, error answers, and the server's own gaps.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import util from 'node:util';
import { after, before, describe, it } from 'node:test';
import { RemoteError } from '../../../src/index.js';
import { openRemote, presignS3Url, remoteStats } from '../../../src/remote.js';
import { pattern, tmpDir, withEnv } from '../../helpers.js';
import { loopbackLookup, S3RVER_CREDENTIALS, startS3rver, type S3Server } from './s3rver.js';

const KiB = 1024;
let s3: S3Server;
const data = pattern(700 * KiB + 3, 21);
const small = { remoteRangeSize: 64 * KiB, remoteRetryBaseMs: 1 };
// Keys in the environment of whoever runs the tests must not change what these tests see.
const cleanEnv = {
  AWS_ACCESS_KEY_ID: undefined, AWS_SECRET_ACCESS_KEY: undefined, AWS_SESSION_TOKEN: undefined, AWS_PROFILE: undefined,
  AWS_REGION: undefined, AWS_DEFAULT_REGION: undefined, AWS_ENDPOINT_URL: undefined, AWS_ENDPOINT_URL_S3: undefined,
  AWS_SHARED_CREDENTIALS_FILE: path.join(tmpDir(), 'no-credentials'), AWS_CONFIG_FILE: path.join(tmpDir(), 'no-config'),
};

before(async () => {
  s3 = await startS3rver(['models', 'other']);
  await s3.put('models', 'llm/weights 1.bin', data);
  await s3.put('models', 'tiny', Buffer.from('hello, bucket'));
});
after(() => s3.stop());

async function readAll(url: string, options: Parameters<typeof openRemote>[1] = {}): Promise<Buffer> {
  return withEnv(cleanEnv, async () => {
    await using obj = await openRemote(url, { ...small, ...options });
    const out = Buffer.alloc(await obj.size());
    assert.equal(await obj.read(out), out.length);
    return out;
  });
}

describe('s3:// against s3rver', () => {
  it('reads an object with signed path-style requests, in many ranges', async () => {
    await withEnv(cleanEnv, async () => {
      await using obj = await openRemote('s3://models/llm/weights 1.bin', { ...small, endpoint: s3.endpoint, credentials: S3RVER_CREDENTIALS });
      assert.deepEqual({ ...obj.info, url: undefined }, { kind: 's3', url: undefined, signed: true, credentialSource: 'options', region: 'us-east-1', addressing: 'path', sizeFrom: 'head', parseWorkers: 0 });
      assert.equal(obj.name, 's3://models/llm/weights 1.bin');
      assert.match(obj.etag ?? '', /^"[0-9a-f]{32}"$/);
      const out = Buffer.alloc(data.length);
      assert.equal(await obj.read(out), data.length);
      assert.ok(out.equals(data));
      const part = Buffer.alloc(100 * KiB);
      assert.equal(await obj.read(part, { fileOffset: 333 }), part.length);
      assert.ok(part.equals(data.subarray(333, 333 + part.length)));
      assert.equal(obj.stats().routes['remote-host'].requests, Math.ceil(data.length / (64 * KiB)) + 2);
      // The key pair (S3RVER / S3RVER) shows nowhere in what the object reports.
      const shown = `${util.inspect(obj, { depth: 10, showHidden: true })} ${JSON.stringify(obj.info)} ${JSON.stringify(obj.stats())} ${JSON.stringify(remoteStats())} ${obj.name}`;
      assert.ok(!shown.includes('S3RVER'), shown);
    });
  });

  it('reads signed s3:// objects with the requests made in worker threads', async () => {
    await withEnv(cleanEnv, async () => {
      await using obj = await openRemote('s3://models/llm/weights 1.bin', { ...small, endpoint: s3.endpoint, credentials: S3RVER_CREDENTIALS, remoteWorkers: 2 });
      // Into shared memory, which the workers write themselves.
      const out = new Uint8Array(new SharedArrayBuffer(data.length));
      assert.equal(await obj.read(out), data.length);
      assert.ok(Buffer.from(out.buffer).equals(data));
    });
    // (s3rver serves unsigned requests too: that the workers sign is checked in workers.test.ts.)
  });

  it('a wrong secret key is refused (403), and the secret appears nowhere', async () => {
    const secret = 'wrong-secret-Qm9vbXNoYWth';
    const err = await withEnv(cleanEnv, () =>
      openRemote('s3://models/tiny', { endpoint: s3.endpoint, credentials: { accessKeyId: 'S3RVER', secretAccessKey: secret } }).catch((e: unknown) => e),
    );
    assert.ok(err instanceof RemoteError);
    assert.equal(err.code, 'ERR_PENSTOCK_REMOTE_ACCESS_DENIED');
    assert.equal(err.status, 403);
    assert.ok(!`${err.message}${err.stack}${JSON.stringify({ ...err })}`.includes(secret));
  });

  it('a wrong secret fails on GET too, with S3 naming the cause (SignatureDoesNotMatch)', async () => {
    const bad = presignS3Url('s3://models/tiny', { endpoint: s3.endpoint, credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'nope' } });
    await assert.rejects(readAll(bad), { code: 'ERR_PENSTOCK_REMOTE_ACCESS_DENIED', serverCode: 'SignatureDoesNotMatch' });
  });

  it('an unknown access key is refused (403 InvalidAccessKeyId)', async () => {
    const bad = presignS3Url('s3://models/tiny', { endpoint: s3.endpoint, credentials: { accessKeyId: 'NOBODY', secretAccessKey: 'S3RVER' } });
    await assert.rejects(readAll(bad), { code: 'ERR_PENSTOCK_REMOTE_ACCESS_DENIED', serverCode: 'InvalidAccessKeyId' });
  });

  it('a missing key or bucket is a 404', async () => {
    const creds = { endpoint: s3.endpoint, credentials: S3RVER_CREDENTIALS };
    await assert.rejects(readAll('s3://models/nothing-here', creds), { code: 'ERR_PENSTOCK_REMOTE_NOT_FOUND' });
    await assert.rejects(readAll('s3://no-such-bucket/x', creds), { code: 'ERR_PENSTOCK_REMOTE_NOT_FOUND' });
    await assert.rejects(readAll(presignS3Url('s3://models/nothing-here', creds)), { code: 'ERR_PENSTOCK_REMOTE_NOT_FOUND', serverCode: 'NoSuchKey' });
  });

  it('without credentials, s3:// refuses to open unless anonymous is asked for', async () => {
    await assert.rejects(readAll('s3://models/tiny', { endpoint: s3.endpoint }), { code: 'ERR_PENSTOCK_REMOTE_NO_CREDENTIALS' });
    // s3rver gap: it serves unsigned requests (real S3 refuses them for a private bucket).
    assert.equal((await readAll('s3://models/tiny', { endpoint: s3.endpoint, anonymous: true })).toString(), 'hello, bucket');
  });

  it('virtual-hosted addressing reaches the bucket through its host name', async () => {
    // s3rver gap: for virtual-hosted requests it puts the bucket into the canonical URI it
    // signs, which SigV4 does not (that signature is checked against the AWS reference signer in
    // signing.test.ts); so here the requests go unsigned, which s3rver allows.
    await withEnv(cleanEnv, async () => {
      await using obj = await openRemote('s3://models/llm/weights 1.bin', { ...small, endpoint: s3.vhostEndpoint, addressing: 'virtual', anonymous: true, lookup: loopbackLookup });
      assert.equal(obj.info.addressing, 'virtual');
      assert.match(obj.info.url, /^http:\/\/models\.s3\.localhost:\d+\/llm\/weights%201\.bin$/);
      const out = Buffer.alloc(data.length);
      await obj.read(out);
      assert.ok(out.equals(data));
    });
  });

  it('credentials, endpoint and addressing from the shared files, by profile', async () => {
    const dir = fs.mkdtempSync(path.join(tmpDir(), 'aws-'));
    const credentials = path.join(dir, 'credentials');
    const config = path.join(dir, 'config');
    fs.writeFileSync(credentials, '[default]\naws_access_key_id = S3RVER\naws_secret_access_key = wrong\n\n[ci]\naws_access_key_id = S3RVER\naws_secret_access_key = S3RVER\n');
    fs.writeFileSync(config, `[profile ci]\nregion = eu-central-1\nendpoint_url = ${s3.endpoint}\ns3 =\n  addressing_style = path\n\n[default]\nendpoint_url = ${s3.endpoint}\n`);
    const env = { ...cleanEnv, AWS_SHARED_CREDENTIALS_FILE: credentials, AWS_CONFIG_FILE: config };
    await withEnv({ ...env, AWS_PROFILE: 'ci' }, async () => {
      await using obj = await openRemote('s3://models/tiny');
      assert.equal(obj.info.credentialSource, 'shared-credentials-file');
      assert.equal(obj.info.region, 'eu-central-1');
      const out = Buffer.alloc(13);
      await obj.read(out, { fileOffset: 0 });
      assert.equal(out.toString(), 'hello, bucket');
    });
    await withEnv(env, async () => {
      await assert.rejects(openRemote('s3://models/tiny'), { code: 'ERR_PENSTOCK_REMOTE_ACCESS_DENIED' });
      await assert.rejects(openRemote('s3://models/tiny', { profile: 'missing' }), { code: 'ERR_PENSTOCK_REMOTE_BAD_CONFIG' });
    });
    // Keys in the environment win over the default profile, as with the AWS tools.
    await withEnv({ ...env, AWS_ACCESS_KEY_ID: 'S3RVER', AWS_SECRET_ACCESS_KEY: 'S3RVER' }, async () => {
      await using obj = await openRemote('s3://models/tiny');
      assert.equal(obj.info.credentialSource, 'environment');
    });
  });
});

describe('presigned URLs against s3rver', () => {
  const creds = () => ({ endpoint: s3.endpoint, credentials: S3RVER_CREDENTIALS });

  it('reads through a presigned GET URL, finding the size with a 1-byte GET', async () => {
    const url = presignS3Url('s3://models/llm/weights 1.bin', { ...creds(), expiresIn: 600 });
    await withEnv(cleanEnv, async () => {
      await using obj = await openRemote(url, small);
      assert.equal(obj.info.sizeFrom, 'range-probe');
      assert.ok(!obj.name.includes('Signature'));
      const out = Buffer.alloc(data.length);
      await obj.read(out);
      assert.ok(out.equals(data));
    });
  });

  it('HEAD with a URL presigned for GET is refused, as by real S3 (why the size comes from a GET)', async () => {
    const u = new URL(presignS3Url('s3://models/tiny', creds()));
    assert.equal((await s3.raw('HEAD', `${u.pathname}${u.search}`)).status, 403);
  });

  it('a tampered or expired presigned URL is refused (403)', async () => {
    const url = presignS3Url('s3://models/tiny', creds());
    const tampered = url.replace('/tiny?', '/tinz?');
    await assert.rejects(readAll(tampered), { code: 'ERR_PENSTOCK_REMOTE_ACCESS_DENIED' });
    const expired = presignS3Url('s3://models/tiny', { ...creds(), expiresIn: 1, now: new Date(Date.now() - 3600_000) });
    await assert.rejects(readAll(expired), { code: 'ERR_PENSTOCK_REMOTE_ACCESS_DENIED' });
  });
});

describe("s3rver's range gaps, and what penstock does with them", () => {
  it('s3rver answers the suffix range bytes=-100 with the first 101 bytes; penstock sends none', async () => {
    const r = await s3.raw('GET', '/models/llm/weights%201.bin', { Range: 'bytes=-100' });
    assert.equal(r.headers['content-range'], `bytes 0-100/${data.length}`);
    // Every range penstock sends names its first and last byte (checked on the range server in
    // host.test.ts), so this gap cannot reach a read.
  });

  it('s3rver answers bytes=0-0 with the whole object: a 1-byte read at offset 0 fails, never returns wrong bytes', async () => {
    const r = await s3.raw('GET', '/models/tiny', { Range: 'bytes=0-0' });
    assert.equal(r.headers['content-range'], 'bytes 0-12/13');
    await withEnv(cleanEnv, async () => {
      await using obj = await openRemote('s3://models/tiny', { endpoint: s3.endpoint, credentials: S3RVER_CREDENTIALS });
      const one = Buffer.alloc(1, 0xee);
      await assert.rejects(obj.read(one), { code: 'ERR_PENSTOCK_REMOTE_BAD_RANGE' });
      assert.equal(one[0], 0xee);
      assert.equal(await obj.read(Buffer.alloc(2), { fileOffset: 1 }), 2);
    });
  });
});
