/** `penstock inspect` and `penstock load` of a sharded checkpoint served over HTTP, verified against its bytes. */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { RangeServer } from '../remote-range-server.js';
import { repoRoot, tmpDir } from '../helpers.js';
import { writeSharded } from '../tensor-writer.js';

const cli = path.join(repoRoot, 'dist/src/cli/main.js');
const noGpu = { PENSTOCK_CUDA_LIBRARY: '/nonexistent/libcuda.so.1' };
// The server runs in this process, so the CLI must run without blocking it.
const run = (...args: string[]) => promisify(execFile)(process.execPath, [cli, ...args], { encoding: 'utf8', env: { ...process.env, ...noGpu } });
const specs = [
  { name: 'embed', dtype: 'BF16' as const, shape: [32, 16] },
  { name: 'layers.0.q', dtype: 'F8_E4M3' as const, shape: [16, 16] },
  { name: 'layers.0.norm', dtype: 'F32' as const, shape: [16] },
];

describe('a checkpoint behind http://', () => {
  const server = new RangeServer();
  let tensors: ReturnType<typeof writeSharded>['tensors'];
  before(async () => {
    await server.start();
    const d = path.join(tmpDir(), 'remote-ckpt');
    const written = writeSharded(d, specs, 3);
    tensors = written.tensors;
    for (const f of [written.index, ...written.files]) server.put(`/ckpt/${path.basename(f)}`, fs.readFileSync(f));
  });
  after(() => server.stop());

  test('load --host prints the requests as ops', async () => {
    const { stdout } = await run('load', server.url('/ckpt/model.safetensors.index.json'), '--host');
    assert.match(stdout, /remote-host \(\d+ ops, 1344 bytes\)/);
    assert.doesNotMatch(stdout, /NaN/);
  });

  test('inspect lists the shards\' tensors from their URLs', async () => {
    const { stdout } = await run('inspect', '--json', server.url('/ckpt/model.safetensors.index.json'));
    const j = JSON.parse(stdout);
    assert.equal(j.totals.tensors, 3);
    assert.equal(j.totals.bytes, 1344);
    assert.ok(j.tensors.every((t: { file: string }) => t.file.startsWith(server.url('/ckpt/model-'))));
  });

  test('load --host --verify: every tensor equal to the bytes the server holds', async () => {
    const { stdout } = await run('load', server.url('/ckpt/model.safetensors.index.json'), '--host', '--verify', '--json');
    const j = JSON.parse(stdout);
    assert.equal(j.bytes, 1344);
    assert.equal(j.verified, true);
    // A remote file's operations are its HTTP requests.
    assert.ok(Number.isInteger(j.routes['remote-host'].ops) && j.routes['remote-host'].ops >= 3, JSON.stringify(j.routes));
    for (const t of tensors) {
      const row = j.tensors.find((x: { name: string }) => x.name === t.name);
      assert.equal(row.sha256, crypto.createHash('sha256').update(t.data).digest('hex'));
    }
  });
});
