/**
 * The AWS credential chain, each source against a fake of its own on 127.0.0.1, and each
 * source's credentials proven by a signed read from s3rver (which refuses a wrong key): EC2
 * instance metadata with the IMDSv2 token flow, container credentials (ECS, EKS Pod Identity)
 * with their authorization token, web identity (EKS IRSA) through a fake STS, an assumed role,
 * SSO through a fake portal, credential_process with a tiny script; credentials renewed before
 * they expire (worker threads too); an install without the optional SDK package.
 */
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { RemoteError } from '../../../src/index.js';
import { openRemote } from '../../../src/remote.js';
import { setCredentialModuleLoader } from '../../../src/sources/remote/credential-chain.js';
import { tmpDir, withEnv } from '../../helpers.js';
import { S3RVER_CREDENTIALS, startS3rver, type S3Server } from './s3rver.js';

let s3: S3Server;
const text = 'credentials from the chain';
before(async () => {
  s3 = await startS3rver(['models']);
  await s3.put('models', 'tiny', Buffer.from(text));
  await s3.put('models', 'big', Buffer.alloc(256 * 1024, 7));
});
after(() => s3.stop());

const later = (ms: number) => new Date(Date.now() + ms).toISOString();
const HOUR = 3600_000;

/** A fresh folder standing for HOME, with nothing in it (the SDK reads ~/.aws there). */
let homes = 0;
function freshHome(): string {
  const home = path.join(tmpDir(), `home-${process.pid}-${++homes}`);
  fs.mkdirSync(path.join(home, '.aws'), { recursive: true });
  return home;
}

/** Every variable that could point the chain elsewhere, cleared; HOME empty. */
function cleanEnv(home = freshHome()): Record<string, string | undefined> {
  const env: Record<string, string | undefined> = { HOME: home, AWS_EC2_METADATA_DISABLED: 'true', AWS_REGION: 'us-east-1' };
  for (const k of [
    'AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY', 'AWS_SESSION_TOKEN', 'AWS_PROFILE', 'AWS_DEFAULT_REGION', 'AWS_ENDPOINT_URL', 'AWS_ENDPOINT_URL_S3',
    'AWS_ENDPOINT_URL_STS', 'AWS_ENDPOINT_URL_SSO', 'AWS_SHARED_CREDENTIALS_FILE', 'AWS_CONFIG_FILE', 'AWS_ROLE_ARN', 'AWS_ROLE_SESSION_NAME',
    'AWS_WEB_IDENTITY_TOKEN_FILE', 'AWS_CONTAINER_CREDENTIALS_FULL_URI', 'AWS_CONTAINER_CREDENTIALS_RELATIVE_URI', 'AWS_CONTAINER_AUTHORIZATION_TOKEN',
    'AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE', 'AWS_EC2_METADATA_SERVICE_ENDPOINT', 'AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE',
    'HTTP_PROXY', 'http_proxy', 'HTTPS_PROXY', 'https_proxy', 'NO_PROXY', 'no_proxy',
  ]) env[k] = undefined;
  return env;
}

/** A fake endpoint on 127.0.0.1: `handle` answers, every request is kept. */
async function fake(handle: (req: http.IncomingMessage, body: string) => { status?: number; type?: string; body: string }) {
  const seen: { method: string; url: string; headers: http.IncomingHttpHeaders; body: string }[] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => (body += c));
    req.on('end', () => {
      seen.push({ method: req.method!, url: req.url!, headers: req.headers, body });
      const a = handle(req, body);
      res.writeHead(a.status ?? 200, { 'content-type': a.type ?? 'application/json' });
      res.end(a.body);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  return { url, seen, close: () => new Promise<void>((r) => server.close(() => r())) };
}

/** Opens s3://models/tiny with whatever the chain finds, reads it, and says where the credentials came from. */
async function readTiny(options: Parameters<typeof openRemote>[1] = {}): Promise<string> {
  await using obj = await openRemote('s3://models/tiny', { endpoint: s3.endpoint, remoteWorkers: 0, ...options });
  const out = Buffer.alloc(await obj.size());
  await obj.read(out);
  assert.equal(out.toString(), text);
  return obj.info.credentialSource!;
}

const stsXml = (action: string, expiration: string) =>
  `<${action}Response xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><${action}Result><Credentials><AccessKeyId>S3RVER</AccessKeyId>` +
  `<SecretAccessKey>S3RVER</SecretAccessKey><SessionToken>session-from-sts</SessionToken><Expiration>${expiration}</Expiration></Credentials>` +
  `<AssumedRoleUser><AssumedRoleId>AROA:s</AssumedRoleId><Arn>arn:aws:sts::123456789012:assumed-role/reader/s</Arn></AssumedRoleUser>` +
  `</${action}Result><ResponseMetadata><RequestId>1</RequestId></ResponseMetadata></${action}Response>`;

describe('the AWS credential chain, against local fakes', () => {
  it('EC2 instance metadata: the IMDSv2 token first, then the role and its credentials with it', async () => {
    const token = 'imds-session-token';
    const imds = await fake((req) => {
      if (req.method === 'PUT' && req.url === '/latest/api/token') {
        assert.ok(Number(req.headers['x-aws-ec2-metadata-token-ttl-seconds']) > 0);
        return { type: 'text/plain', body: token };
      }
      if (req.headers['x-aws-ec2-metadata-token'] !== token) return { status: 401, body: '' };
      if (/^\/latest\/meta-data\/iam\/security-credentials(-extended)?\/$/.test(req.url!)) return { type: 'text/plain', body: 'gpu-node-role' };
      if (/^\/latest\/meta-data\/iam\/security-credentials(-extended)?\/gpu-node-role$/.test(req.url!))
        return { body: JSON.stringify({ Code: 'Success', Type: 'AWS-HMAC', AccessKeyId: 'S3RVER', SecretAccessKey: 'S3RVER', Token: 'imds-session', Expiration: later(6 * HOUR), LastUpdated: new Date().toISOString() }) };
      return { status: 404, body: '' };
    });
    try {
      const source = await withEnv({ ...cleanEnv(), AWS_EC2_METADATA_DISABLED: undefined, AWS_EC2_METADATA_SERVICE_ENDPOINT: imds.url }, () => readTiny());
      assert.equal(source, 'instance-metadata');
      assert.equal(imds.seen[0]!.method, 'PUT');
      const creds = imds.seen.filter((r) => r.url.includes('security-credentials'));
      assert.ok(creds.length >= 2);
      for (const r of creds) assert.equal(r.headers['x-aws-ec2-metadata-token'], token);
    } finally {
      await imds.close();
    }
  });

  it('container credentials (ECS task role, EKS Pod Identity): the full URI with its authorization token, from a variable or a file', async () => {
    const secret = 'container-auth-token';
    const ecs = await fake((req) =>
      req.headers.authorization === secret
        ? { body: JSON.stringify({ AccessKeyId: 'S3RVER', SecretAccessKey: 'S3RVER', Token: 'from-container', Expiration: later(HOUR), AccountId: '123456789012' }) }
        : { status: 401, body: '{"message":"no"}' },
    );
    try {
      const env = { ...cleanEnv(), AWS_CONTAINER_CREDENTIALS_FULL_URI: `${ecs.url}/v1/credentials` };
      assert.equal(await withEnv({ ...env, AWS_CONTAINER_AUTHORIZATION_TOKEN: secret }, () => readTiny()), 'container');
      const file = path.join(tmpDir(), 'pod-identity-token');
      fs.writeFileSync(file, secret);
      assert.equal(await withEnv({ ...env, AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE: file }, () => readTiny()), 'container');
      assert.ok(ecs.seen.length >= 2);
      for (const r of ecs.seen) assert.deepEqual([r.url, r.headers.authorization], ['/v1/credentials', secret]);
      // A wrong token: the source is named, and the failure is not "no credentials".
      const err = await withEnv({ ...env, AWS_CONTAINER_AUTHORIZATION_TOKEN: 'wrong' }, () => readTiny().catch((e: unknown) => e));
      assert.ok(err instanceof RemoteError, String(err));
      assert.equal(err.code, 'ERR_PENSTOCK_REMOTE_CREDENTIALS_FAILED');
      assert.match(err.message, /AWS_CONTAINER_CREDENTIALS_FULL_URI/);
    } finally {
      await ecs.close();
    }
  });

  it('web identity (EKS IRSA): the token file exchanged at STS (AWS_ENDPOINT_URL_STS) for the role', async () => {
    const sts = await fake((_req, body) => {
      const form = new URLSearchParams(body);
      assert.equal(form.get('Action'), 'AssumeRoleWithWebIdentity');
      return { type: 'text/xml', body: stsXml('AssumeRoleWithWebIdentity', later(HOUR)) };
    });
    try {
      const tokenFile = path.join(tmpDir(), 'irsa-token');
      fs.writeFileSync(tokenFile, 'eyJ.projected.token');
      const env = { ...cleanEnv(), AWS_WEB_IDENTITY_TOKEN_FILE: tokenFile, AWS_ROLE_ARN: 'arn:aws:iam::123456789012:role/reader', AWS_ENDPOINT_URL_STS: sts.url };
      assert.equal(await withEnv(env, () => readTiny()), 'web-identity');
      const form = new URLSearchParams(sts.seen[0]!.body);
      assert.deepEqual([form.get('WebIdentityToken'), form.get('RoleArn')], ['eyJ.projected.token', 'arn:aws:iam::123456789012:role/reader']);
    } finally {
      await sts.close();
    }
  });

  it('a profile that assumes a role from another profile (role_arn, source_profile) through STS', async () => {
    const sts = await fake(() => ({ type: 'text/xml', body: stsXml('AssumeRole', later(HOUR)) }));
    try {
      const home = freshHome();
      fs.writeFileSync(path.join(home, '.aws', 'credentials'), '[base]\naws_access_key_id = AKIDBASE\naws_secret_access_key = base-secret\n');
      fs.writeFileSync(path.join(home, '.aws', 'config'), `[profile reader]\nrole_arn = arn:aws:iam::123456789012:role/reader\nsource_profile = base\nregion = us-east-1\n`);
      assert.equal(await withEnv({ ...cleanEnv(home), AWS_ENDPOINT_URL_STS: sts.url }, () => readTiny({ profile: 'reader' })), 'assume-role');
      assert.equal(new URLSearchParams(sts.seen[0]!.body).get('Action'), 'AssumeRole');
      // The call to STS was signed with the source profile's key.
      assert.match(String(sts.seen[0]!.headers.authorization), /Credential=AKIDBASE\//);
    } finally {
      await sts.close();
    }
  });

  it('SSO: the cached token of an sso-session exchanged at the portal (AWS_ENDPOINT_URL_SSO) for role credentials', async () => {
    const portal = await fake((req) => {
      if (req.headers['x-amz-sso_bearer_token'] !== 'sso-access-token') return { status: 401, body: '{}' };
      return { body: JSON.stringify({ roleCredentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER', sessionToken: 'from-sso', expiration: Date.now() + HOUR } }) };
    });
    try {
      const home = freshHome();
      fs.writeFileSync(
        path.join(home, '.aws', 'config'),
        '[profile dev]\nsso_session = corp\nsso_account_id = 111122223333\nsso_role_name = Reader\nregion = us-east-1\n\n[sso-session corp]\nsso_region = us-east-1\nsso_start_url = https://corp.awsapps.com/start\n',
      );
      const cache = path.join(home, '.aws', 'sso', 'cache');
      fs.mkdirSync(cache, { recursive: true });
      const name = crypto.createHash('sha1').update('corp').digest('hex');
      fs.writeFileSync(path.join(cache, `${name}.json`), JSON.stringify({ accessToken: 'sso-access-token', expiresAt: later(8 * HOUR), region: 'us-east-1', startUrl: 'https://corp.awsapps.com/start' }));
      assert.equal(await withEnv({ ...cleanEnv(home), AWS_ENDPOINT_URL_SSO: portal.url, AWS_PROFILE: 'dev' }, () => readTiny()), 'sso');
      const q = new URL(portal.seen[0]!.url, 'http://x').searchParams;
      assert.deepEqual([q.get('role_name'), q.get('account_id')], ['Reader', '111122223333']);
    } finally {
      await portal.close();
    }
  });

  it('credential_process: a program that prints the credentials as JSON', async () => {
    const home = freshHome();
    const script = path.join(home, 'creds.mjs');
    fs.writeFileSync(script, `console.log(JSON.stringify({ Version: 1, AccessKeyId: 'S3RVER', SecretAccessKey: 'S3RVER', SessionToken: 'from-process', Expiration: '${later(HOUR)}' }));\n`);
    fs.writeFileSync(path.join(home, '.aws', 'config'), `[profile tool]\ncredential_process = "${process.execPath}" "${script}"\n`);
    assert.equal(await withEnv(cleanEnv(home), () => readTiny({ profile: 'tool' })), 'process');
    // A program that fails: named as the source that failed.
    fs.writeFileSync(path.join(home, '.aws', 'config'), `[profile broken]\ncredential_process = "${process.execPath}" -e "process.exit(3)"\n`);
    await assert.rejects(withEnv(cleanEnv(home), () => readTiny({ profile: 'broken' })), (e: RemoteError) => {
      assert.equal(e.code, 'ERR_PENSTOCK_REMOTE_CREDENTIALS_FAILED');
      assert.match(e.message, /credential_process/);
      return true;
    });
  });

  it('nothing anywhere (instance metadata disabled): ERR_PENSTOCK_REMOTE_NO_CREDENTIALS, and anonymous asks nobody', async () => {
    const imds = await fake(() => ({ status: 500, body: '' }));
    try {
      await assert.rejects(withEnv(cleanEnv(), () => readTiny()), { code: 'ERR_PENSTOCK_REMOTE_NO_CREDENTIALS' });
      const env = { ...cleanEnv(), AWS_EC2_METADATA_DISABLED: undefined, AWS_EC2_METADATA_SERVICE_ENDPOINT: imds.url };
      assert.equal(await withEnv(env, () => readTiny({ anonymous: true })), 'anonymous');
      assert.equal(imds.seen.length, 0);
    } finally {
      await imds.close();
    }
  });
});

describe('credentials that expire', () => {
  for (const remoteWorkers of [0, 2]) {
    it(`are renewed before they expire, and the renewed ones sign the next ranges${remoteWorkers ? ' (worker threads)' : ''}`, async () => {
      const read = async (second: { accessKeyId: string; secretAccessKey: string }) => {
        let calls = 0;
        const credentials = async () => {
          calls++;
          // The first expire in a minute (inside the five minutes of margin): renewed at the first range.
          return calls === 1 ? { ...S3RVER_CREDENTIALS, expiration: new Date(Date.now() + 60_000) } : { ...second, expiration: new Date(Date.now() + HOUR) };
        };
        await using obj = await openRemote('s3://models/big', { endpoint: s3.endpoint, credentials, remoteWorkers, remoteRangeSize: 64 * 1024 });
        assert.equal(obj.info.credentialSource, 'provider');
        const out = remoteWorkers ? new Uint8Array(new SharedArrayBuffer(256 * 1024)) : Buffer.alloc(256 * 1024);
        try {
          await obj.read(out);
          assert.ok(out.every((b) => b === 7));
        } finally {
          assert.equal(calls, 2);
        }
      };
      await withEnv(cleanEnv(), () => read(S3RVER_CREDENTIALS));
      // Renewed to a key s3rver refuses: the ranges were signed with the renewed key, not the first.
      await assert.rejects(withEnv(cleanEnv(), () => read({ accessKeyId: 'S3RVER', secretAccessKey: 'not-the-secret' })), { code: 'ERR_PENSTOCK_REMOTE_ACCESS_DENIED' });
    });
  }
});

describe('without the optional AWS SDK package', () => {
  const missing = () => Promise.reject(Object.assign(new Error(`Cannot find package '@aws-sdk/credential-provider-node'`), { code: 'ERR_MODULE_NOT_FOUND' }));

  it('static keys still work, a source only the SDK can use is named, and nothing found says what to install', async () => {
    setCredentialModuleLoader(missing);
    try {
      const home = freshHome();
      fs.writeFileSync(path.join(home, '.aws', 'credentials'), '[default]\naws_access_key_id = S3RVER\naws_secret_access_key = S3RVER\n');
      assert.equal(await withEnv(cleanEnv(home), () => readTiny()), 'shared-credentials-file');
      assert.equal(await withEnv({ ...cleanEnv(), AWS_ACCESS_KEY_ID: 'S3RVER', AWS_SECRET_ACCESS_KEY: 'S3RVER' }, () => readTiny()), 'environment');
      fs.writeFileSync(path.join(home, '.aws', 'config'), '[profile tool]\ncredential_process = /bin/false\n');
      await assert.rejects(withEnv(cleanEnv(home), () => readTiny({ profile: 'tool' })), (e: RemoteError) => {
        assert.equal(e.code, 'ERR_PENSTOCK_REMOTE_SDK_MISSING');
        assert.match(e.message, /npm install @aws-sdk\/credential-provider-node/);
        return true;
      });
      await assert.rejects(withEnv({ ...cleanEnv(), AWS_CONTAINER_CREDENTIALS_FULL_URI: 'http://127.0.0.1:9/x' }, () => readTiny()), { code: 'ERR_PENSTOCK_REMOTE_SDK_MISSING' });
      await assert.rejects(withEnv(cleanEnv(), () => readTiny()), (e: RemoteError) => {
        assert.equal(e.code, 'ERR_PENSTOCK_REMOTE_NO_CREDENTIALS');
        assert.match(e.message, /@aws-sdk\/credential-provider-node/);
        return true;
      });
    } finally {
      setCredentialModuleLoader(undefined);
    }
  });

  it('a package that is there but does not load is named, with a typed error', async () => {
    setCredentialModuleLoader(() => Promise.reject(new SyntaxError('Unexpected token')));
    try {
      await assert.rejects(withEnv(cleanEnv(), () => readTiny()), (e: RemoteError) => {
        assert.equal(e.code, 'ERR_PENSTOCK_REMOTE_SDK_MISSING');
        assert.match(e.message, /does not load \(Unexpected token\)/);
        return true;
      });
    } finally {
      setCredentialModuleLoader(undefined);
    }
  });
});
