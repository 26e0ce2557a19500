/** Remote reads, the parts without a server: addresses, shared files, backoff, Content-Range, error codes (settings: test/settings/config.test.ts). */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { parseRemoteUrl, resolveS3Config } from '../../../src/remote.js';
import { REMOTE_ERROR_CODES } from '../../../src/sources/remote/errors.js';
import { resolveBeside } from '../../../src/sources/open-source.js';
import { parseIni } from '../../../src/sources/remote/credentials.js';
import { redactUrl, s3ObjectUrl } from '../../../src/sources/remote/url.js';
import { parseContentRange, parseRetryAfter } from '../../../src/sources/remote/http.js';
import { backoffMs, retryDelayMs } from '../../../src/sources/remote/retry.js';
import { tmpDir } from '../../helpers.js';

describe('addresses', () => {
  it('parses s3:// and http(s):// and refuses the rest', () => {
    assert.deepEqual(parseRemoteUrl('s3://my-bucket/a/b c.bin'), { kind: 's3', bucket: 'my-bucket', key: 'a/b c.bin' });
    const h = parseRemoteUrl('https://host:8443/x?X-Amz-Signature=1#frag');
    assert.equal(h.kind, 'http');
    assert.ok(h.kind === 'http' && h.presigned && h.url.hash === '');
    for (const bad of ['s3://', 's3://b', 's3://b/', 's3://-/k', 'file:///etc/passwd', 'nope', 's3:/b/k'])
      assert.throws(() => parseRemoteUrl(bad), { code: 'ERR_PENSTOCK_REMOTE_INVALID_URL' }, bad);
  });

  it('builds virtual-hosted and path-style URLs', () => {
    assert.equal(s3ObjectUrl('b', 'k/x y+z', { region: 'eu-west-1', addressing: 'auto' }).href, 'https://b.s3.eu-west-1.amazonaws.com/k/x%20y%2Bz');
    // Dots in a bucket name break the *.s3 certificate: path-style.
    assert.equal(s3ObjectUrl('my.bucket', 'k', { region: 'eu-west-1', addressing: 'auto' }).href, 'https://s3.eu-west-1.amazonaws.com/my.bucket/k');
    assert.equal(s3ObjectUrl('b', 'k', { region: 'us-east-1', addressing: 'path' }).href, 'https://s3.us-east-1.amazonaws.com/b/k');
    assert.equal(s3ObjectUrl('b', 'k', { region: 'x', endpoint: 'http://127.0.0.1:9000', addressing: 'auto' }).href, 'http://127.0.0.1:9000/b/k');
    assert.equal(s3ObjectUrl('b', 'k', { region: 'x', endpoint: 'http://minio.local:9000/', addressing: 'virtual' }).href, 'http://b.minio.local:9000/k');
    assert.throws(() => s3ObjectUrl('b', 'k', { region: 'x', endpoint: 'ftp://h', addressing: 'auto' }), { code: 'ERR_PENSTOCK_REMOTE_INVALID_URL' });
  });

  it('resolves shards beside an index, in a bucket, at a URL or on disk', () => {
    assert.equal(resolveBeside('s3://bkt/m/model.safetensors.index.json', 'model-00001 of 2.safetensors'), 's3://bkt/m/model-00001 of 2.safetensors');
    assert.equal(resolveBeside('s3://bkt/index.json', 'sub/x.bin'), 's3://bkt/sub/x.bin');
    assert.equal(resolveBeside('s3://bkt/a/c/index.json', '../x.bin'), 's3://bkt/a/x.bin');
    assert.throws(() => resolveBeside('s3://bkt/index.json', '../x.bin'), { code: 'ERR_PENSTOCK_REMOTE_INVALID_URL' });
    assert.equal(resolveBeside('https://h/p/index.json?X-Amz-Signature=s', 'x.bin'), 'https://h/p/x.bin');
    assert.equal(resolveBeside('/data/m/index.json', 'x.bin'), '/data/m/x.bin');
    assert.equal(resolveBeside('/data/m/index.json', 's3://o/k'), 's3://o/k');
  });

  it('keeps what it resolves beside a remote base on the base\'s origin or bucket', () => {
    assert.equal(resolveBeside('http://u:p@h:81/p/index.json', 'x.bin'), 'http://u:p@h:81/p/x.bin');
    assert.equal(resolveBeside('http://h/p/index.json', 'http://h/p/y.bin'), 'http://h/p/y.bin');
    for (const other of ['//evil/x.bin', '\\\\evil\\x.bin', 'https:h/x.bin', 'https://h/p/x.bin', 'http://h:82/p/x.bin', 'http://u:p@h/p/x.bin', 'file:x.bin'])
      assert.throws(() => resolveBeside('http://h/p/index.json', other), { code: 'ERR_PENSTOCK_REMOTE_INVALID_URL' }, other);
    assert.throws(() => resolveBeside('s3://bkt/m/index.json', 's3://other/m/x.bin'), { code: 'ERR_PENSTOCK_REMOTE_INVALID_URL' });
    assert.throws(() => resolveBeside('s3://bkt/m/index.json', 'https://h/x.bin'), { code: 'ERR_PENSTOCK_REMOTE_INVALID_URL' });
    assert.equal(resolveBeside('s3://bkt/m/index.json', 's3://bkt/m/x.bin'), 's3://bkt/m/x.bin');
  });

  it('redacts user info and query strings', () => {
    assert.equal(redactUrl(new URL('https://user:pass@h.example/k?X-Amz-Signature=s')), 'https://h.example/k?…');
    assert.equal(redactUrl(new URL('http://h:81/k')), 'http://h:81/k');
  });
});

describe('Content-Range and backoff', () => {
  it('parses Content-Range strictly', () => {
    assert.deepEqual(parseContentRange('bytes 0-99/1000'), { first: 0, last: 99, total: 1000 });
    assert.deepEqual(parseContentRange('bytes 5-5/*'), { first: 5, last: 5 });
    for (const bad of [undefined, '', 'bytes 9-1/10', 'items 0-1/2', 'bytes */10', 'bytes 0-1/x'])
      assert.equal(parseContentRange(bad), undefined, String(bad));
  });

  it('backs off exponentially with full jitter, capped', () => {
    assert.equal(backoffMs(1, 100, () => 0.999999), 99);
    assert.equal(backoffMs(4, 100, () => 0.5), 400);
    assert.equal(backoffMs(40, 100, () => 0.999999), 19999);
    assert.equal(backoffMs(3, 100, () => 0), 0);
  });

  it('waits out a Retry-After, up to the cap', () => {
    assert.equal(parseRetryAfter('3'), 3000);
    assert.equal(parseRetryAfter('Wed, 21 Oct 2015 07:28:05 GMT', Date.parse('Wed, 21 Oct 2015 07:28:00 GMT')), 5000);
    assert.equal(parseRetryAfter('soon'), undefined);
    assert.equal(parseRetryAfter(undefined), undefined);
    assert.equal(retryDelayMs(1, 100, 3000, () => 0.5), 3000);
    assert.equal(retryDelayMs(1, 100, undefined, () => 0.5), 50);
    assert.equal(retryDelayMs(1, 100, 3_600_000, () => 0.5), 20_000);
  });
});

describe('shared AWS files', () => {
  const dir = fs.mkdtempSync(path.join(tmpDir(), 'aws-units-'));
  const credentials = path.join(dir, 'credentials');
  const config = path.join(dir, 'config');
  fs.writeFileSync(credentials, '# comment\n[default]\naws_access_key_id = AKIDDEFAULT\naws_secret_access_key = sdefault\n[half]\naws_access_key_id = AKIDHALF\n');
  fs.writeFileSync(config, '[default]\nregion = eu-north-1\n[profile dev]\nregion = ap-east-1\naws_access_key_id = AKIDDEV\naws_secret_access_key = sdev\naws_session_token = tdev\nendpoint_url = http://10.0.0.1:9000\ns3 =\n  addressing_style = virtual\n  endpoint_url = http://10.0.0.2:9000\n');
  const places = (env: Record<string, string> = {}) => ({ env: { AWS_SHARED_CREDENTIALS_FILE: credentials, AWS_CONFIG_FILE: config, ...env }, home: dir });

  it('parses nested sections', () => {
    const ini = parseIni(fs.readFileSync(config, 'utf8'));
    assert.equal(ini.get('profile dev')?.get('s3.addressing_style'), 'virtual');
    assert.equal(ini.get('profile dev')?.get('endpoint_url'), 'http://10.0.0.1:9000');
  });

  it('takes the default profile, with its region from the config file', () => {
    const c = resolveS3Config({}, places());
    assert.equal(c.credentialSource, 'shared-credentials-file');
    assert.equal(c.credentials?.accessKeyId, 'AKIDDEFAULT');
    assert.equal(c.region, 'eu-north-1');
    assert.equal(c.addressing, 'auto');
    assert.equal(c.endpoint, undefined);
  });

  it('environment keys win over the default profile, but not over a named one', () => {
    const env = { AWS_ACCESS_KEY_ID: 'AKIDENV', AWS_SECRET_ACCESS_KEY: 'senv', AWS_SESSION_TOKEN: 'tenv', AWS_REGION: 'sa-east-1' };
    const c = resolveS3Config({}, places(env));
    assert.deepEqual([c.credentialSource, c.credentials?.sessionToken, c.region], ['environment', 'tenv', 'sa-east-1']);
    const d = resolveS3Config({}, places({ ...env, AWS_PROFILE: 'dev' }));
    assert.deepEqual([d.credentialSource, d.credentials?.accessKeyId, d.credentials?.sessionToken], ['config-file', 'AKIDDEV', 'tdev']);
    assert.equal(d.region, 'sa-east-1');
  });

  it('a profile brings its endpoint (the s3 one first) and addressing; options override', () => {
    const d = resolveS3Config({ profile: 'dev' }, places());
    assert.deepEqual([d.endpoint, d.addressing, d.region], ['http://10.0.0.2:9000', 'virtual', 'ap-east-1']);
    const e = resolveS3Config({ profile: 'dev', endpoint: 'http://h:1', addressing: 'path', region: 'r' }, places({ AWS_ENDPOINT_URL_S3: 'http://ignored' }));
    assert.deepEqual([e.endpoint, e.addressing, e.region], ['http://h:1', 'path', 'r']);
    assert.equal(resolveS3Config({}, places({ AWS_ENDPOINT_URL: 'http://a', AWS_ENDPOINT_URL_S3: 'http://b' })).endpoint, 'http://b');
  });

  it('half a key pair, a missing profile, or no credentials at all are typed errors', () => {
    assert.throws(() => resolveS3Config({ profile: 'half' }, places()), { code: 'ERR_PENSTOCK_REMOTE_BAD_CONFIG' });
    assert.throws(() => resolveS3Config({ profile: 'nobody' }, places()), { code: 'ERR_PENSTOCK_REMOTE_BAD_CONFIG' });
    assert.throws(() => resolveS3Config({}, places({ AWS_ACCESS_KEY_ID: 'AKIDONLY' })), { code: 'ERR_PENSTOCK_REMOTE_BAD_CONFIG' });
    const none = { env: { AWS_SHARED_CREDENTIALS_FILE: path.join(dir, 'none'), AWS_CONFIG_FILE: path.join(dir, 'none') }, home: dir };
    assert.throws(() => resolveS3Config({}, none), { code: 'ERR_PENSTOCK_REMOTE_NO_CREDENTIALS' });
    assert.equal(resolveS3Config({ anonymous: true }, none).credentials, undefined);
    assert.equal(resolveS3Config({ anonymous: true }, { ...none, env: { ...none.env, AWS_DEFAULT_REGION: 'x-1' } }).region, 'x-1');
    assert.equal(resolveS3Config({ anonymous: true }, none).region, 'us-east-1');
  });
});

describe('error codes', () => {
  it('every remote error code is listed with a meaning', () => {
    for (const [code, meaning] of Object.entries(REMOTE_ERROR_CODES)) {
      assert.match(code, /^ERR_PENSTOCK_REMOTE_[A-Z_]+$/);
      assert.ok(meaning.length > 10);
    }
  });
});
