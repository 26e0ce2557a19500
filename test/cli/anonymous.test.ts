/** `load` and `inspect` take `--anonymous` for public buckets: s3:// requests go out unsigned. */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import { repoRoot, tmpDir } from '../helpers.js';
import { RangeServer } from '../remote-range-server.js';
import { writeSafetensors } from '../tensor-writer.js';

const exec = promisify(execFile);
const cli = path.join(repoRoot, 'dist/src/cli/main.js');
const server = new RangeServer();

before(async () => {
  await server.start();
  const f = path.join(tmpDir(), 'public.safetensors');
  writeSafetensors(f, [{ name: 'w', dtype: 'F32', shape: [64] }]);
  server.put('/public-bucket/model.safetensors', fs.readFileSync(f));
});
after(() => server.stop());

function env(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const e = { ...process.env };
  for (const k of Object.keys(e)) if (k.startsWith('AWS_') || k.startsWith('PENSTOCK_')) delete e[k];
  const none = path.join(tmpDir(), 'no-such-aws-file');
  return { ...e, AWS_ENDPOINT_URL_S3: `http://127.0.0.1:${server.port}`, AWS_REGION: 'us-east-1', AWS_SHARED_CREDENTIALS_FILE: none, AWS_CONFIG_FILE: none, PENSTOCK_CUDA_LIBRARY: '/nonexistent/libcuda.so.1', ...extra };
}

describe('--anonymous', () => {
  for (const args of [['inspect', '--json'], ['load', '--host', '--verify', '--json']]) {
    it(`${args[0]} sends no signature with it, and signs without it`, async () => {
      const url = 's3://public-bucket/model.safetensors';
      server.reset();
      const { stdout } = await exec(process.execPath, [cli, ...args, url, '--anonymous'], { env: env({ AWS_ACCESS_KEY_ID: 'AKIDEXAMPLE', AWS_SECRET_ACCESS_KEY: 'secret' }) });
      assert.equal((JSON.parse(stdout) as { tensors: unknown[] }).tensors.length, 1);
      assert.ok(server.requests.length > 0);
      assert.deepEqual(server.requests.filter((r) => r.headers.authorization !== undefined), [], 'no request was signed');
      server.reset();
      await exec(process.execPath, [cli, ...args, url], { env: env({ AWS_ACCESS_KEY_ID: 'AKIDEXAMPLE', AWS_SECRET_ACCESS_KEY: 'secret' }) });
      assert.ok(server.requests.every((r) => /^AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE\//.test(String(r.headers.authorization))), 'every request was signed');
    });
  }
});
