/** https:// objects: a certificate that is trusted through `ca`, and one that is not. */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { openRemote } from '../../../src/remote.js';
import { pattern, repoRoot } from '../../helpers.js';
import { RangeServer } from '../../remote-range-server.js';

// A self-signed certificate for 127.0.0.1 and localhost, valid for a century, made for these tests.
const dir = path.join(repoRoot, 'test/fixtures/tls');
const cert = fs.readFileSync(path.join(dir, 'cert.pem'), 'utf8');
const server = new RangeServer({ tls: { key: fs.readFileSync(path.join(dir, 'key.pem'), 'utf8'), cert } });
const data = pattern(900 * 1024, 51);

before(async () => {
  await server.start();
  server.put('/object', data);
});
after(() => server.stop());

describe('https://', () => {
  for (const remoteWorkers of [0, 2]) {
    it(`reads over TLS with the server's CA added${remoteWorkers ? ', from worker threads' : ''}`, async () => {
      await using obj = await openRemote(server.url(), { ca: cert, remoteRangeSize: 64 * 1024, remoteWorkers });
      assert.match(obj.name, /^https:\/\/127\.0\.0\.1:\d+\/object$/);
      // Workers write into shared memory only (other host memory is written on the main thread).
      const out = remoteWorkers ? new Uint8Array(new SharedArrayBuffer(data.length)) : Buffer.alloc(data.length);
      assert.equal(await obj.read(out), data.length);
      assert.ok(Buffer.from(out.buffer, out.byteOffset, out.length).equals(data));
    });
  }

  it('refuses an untrusted certificate at once, with a typed error', async () => {
    server.reset();
    await assert.rejects(openRemote(server.url(), { remoteRetryBaseMs: 1 }), (e: Error & { code?: string; attempts?: number }) => {
      assert.equal(e.code, 'ERR_PENSTOCK_REMOTE_TLS');
      assert.equal(e.attempts, undefined);
      return true;
    });
  });
});
