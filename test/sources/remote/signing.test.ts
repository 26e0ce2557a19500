/**
 * SigV4 as penstock signs it (through aws4), checked against the AWS reference signer
 * (@smithy/signature-v4) with a fixed clock: header signing for path-style and virtual-hosted
 * requests, with and without a session token, and presigned URLs.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Hash } from '@smithy/hash-node';
import { SignatureV4 } from '@smithy/signature-v4';
import { presignS3Url, type AwsCredentials } from '../../../src/remote.js';
import { signS3Request } from '../../../src/sources/remote/signing.js';
import { s3ObjectUrl } from '../../../src/sources/remote/url.js';

const now = new Date('2026-03-04T05:06:07Z');
const keys: AwsCredentials = { accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY' };
const temporary: AwsCredentials = { ...keys, sessionToken: 'FQoGZXIvYXdzEXAMPLETOKEN//////////' };

function reference(credentials: AwsCredentials, region: string): SignatureV4 {
  return new SignatureV4({ credentials, region, service: 's3', sha256: Hash.bind(null, 'sha256'), uriEscapePath: false });
}

const cases: [string, URL, string][] = [
  ['virtual-hosted on AWS', s3ObjectUrl('models', 'llm/weights 1.bin', { region: 'eu-west-1', addressing: 'auto' }), 'eu-west-1'],
  ['path-style on a custom endpoint', s3ObjectUrl('models', 'a+b/c=d~e.bin', { region: 'us-east-1', endpoint: 'http://127.0.0.1:9000', addressing: 'auto' }), 'us-east-1'],
  ['virtual-hosted on a custom endpoint', s3ObjectUrl('models', 'ünï/ç.bin', { region: 'us-west-2', endpoint: 'https://s3.example.test', addressing: 'virtual' }), 'us-west-2'],
];

describe('SigV4 header signing matches the AWS reference signer', () => {
  for (const [what, url, region] of cases) {
    for (const creds of [keys, temporary]) {
      it(`${what}${creds.sessionToken ? ', with a session token' : ''}`, async () => {
        const signed = signS3Request('GET', url, { Range: 'bytes=100-199' }, creds, region, now);
        const { Authorization, ...rest } = signed;
        const headers = Object.fromEntries(Object.entries(rest).map(([k, v]) => [k.toLowerCase(), v]));
        if (creds.sessionToken) assert.equal(headers['x-amz-security-token'], creds.sessionToken);
        const ref = await reference(creds, region).sign(
          { method: 'GET', protocol: url.protocol, hostname: url.hostname, path: url.pathname, query: {}, headers, ...(url.port ? { port: Number(url.port) } : {}) },
          // aws4 leaves Range out of the signed headers, which SigV4 allows (S3 requires host and x-amz-*).
          { signingDate: now, unsignableHeaders: new Set(['range']) },
        );
        assert.equal(Authorization, ref.headers.authorization);
      });
    }
  }
});

describe('presigned URLs match the AWS reference signer', () => {
  for (const creds of [keys, temporary]) {
    it(`a GET URL valid 900 s${creds.sessionToken ? ', with a session token' : ''}`, async () => {
      const mine = new URL(presignS3Url('s3://models/llm/weights 1.bin', { credentials: creds, region: 'eu-west-1', now, expiresIn: 900 }));
      assert.equal(mine.host, 'models.s3.eu-west-1.amazonaws.com');
      const ref = await reference(creds, 'eu-west-1').presign(
        { method: 'GET', protocol: 'https:', hostname: mine.hostname, path: mine.pathname, query: {}, headers: { host: mine.host, 'x-amz-content-sha256': 'UNSIGNED-PAYLOAD' } },
        { signingDate: now, expiresIn: 900, unhoistableHeaders: new Set(['x-amz-content-sha256']), unsignableHeaders: new Set(['x-amz-content-sha256']) },
      );
      assert.equal(mine.searchParams.get('X-Amz-Signature'), ref.query?.['X-Amz-Signature']);
      assert.equal(mine.searchParams.get('X-Amz-Security-Token') ?? undefined, ref.query?.['X-Amz-Security-Token']);
    });
  }

  it('refuses expiries S3 does not accept', () => {
    for (const expiresIn of [0, 604801, 1.5])
      assert.throws(() => presignS3Url('s3://b/k', { credentials: keys, expiresIn }), { code: 'ERR_PENSTOCK_REMOTE_INVALID_URL' });
  });
});
