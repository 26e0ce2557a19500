/** `penstock inspect` and `penstock load`, on the host and into the fake GPU; verification. */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { assertVerified, loadTensors, verifyTensorSet } from '../../src/index.js';
import { cufileNoDirectPath } from '../../src/vocabulary/reasons.js';
import { fakeDriverDir, fakeSystemRoot, repoRoot, tmpDir } from '../helpers.js';
import { writeRawSafetensors, writeSafetensors, writeSharded } from '../tensor-writer.js';

const cli = path.join(repoRoot, 'dist/src/cli/main.js');
const noGpu = { PENSTOCK_CUDA_LIBRARY: '/nonexistent/libcuda.so.1' };
// A machine without nvidia-fs or P2PDMA: cuFile's driver is never opened, so the route's reason
// does not depend on whether a background open finished before the load started.
const fakeGpu = { PENSTOCK_SYSTEM_ROOT: fakeSystemRoot({ nvidiaFs: false }), PENSTOCK_CUDA_LIBRARY: path.join(fakeDriverDir, 'libcuda.so.1'), PENSTOCK_CUFILE_LIBRARY: path.join(fakeDriverDir, 'libcufile.so.0') };
const run = (env: Record<string, string>, ...args: string[]) => spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', env: { ...process.env, ...env } });
let n = 0;
const specs = [
  { name: 'embed', dtype: 'BF16' as const, shape: [32, 16] },
  { name: 'layers.0.q', dtype: 'F8_E4M3' as const, shape: [16, 16] },
  { name: 'layers.0.norm', dtype: 'F32' as const, shape: [16] },
];

describe('penstock inspect', () => {
  test('lists tensors and totals; --json has the same', () => {
    const f = path.join(tmpDir(), `i-${++n}.safetensors`);
    writeSafetensors(f, specs, { metadata: { format: 'pt' } });
    const r = run(noGpu, 'inspect', f);
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /^embed\s+BF16\s+\[32, 16\]\s+1024$/m);
    assert.match(r.stdout, /^layers\.0\.q\s+F8_E4M3\s+\[16, 16\]\s+256$/m);
    assert.match(r.stdout, /^total: 3 tensors, 1344 bytes/m);
    const j = JSON.parse(run(noGpu, 'inspect', '--json', f).stdout);
    assert.equal(j.totals.tensors, 3);
    assert.equal(j.totals.bytes, 1344);
    assert.deepEqual(j.files[0].metadata, { format: 'pt' });
    assert.deepEqual(j.tensors[1], { name: 'layers.0.q', dtype: 'F8_E4M3', shape: [16, 16], bytes: 256, file: f });
  });

  test('a malformed file exits 1 with its code; no path is a usage error', () => {
    const f = path.join(tmpDir(), `i-${++n}.safetensors`);
    writeRawSafetensors(f, '{"a": {"dtype": "F5", "shape": [1], "data_offsets": [0, 1]}}', 1);
    const r = run(noGpu, 'inspect', f);
    assert.equal(r.status, 1);
    assert.match(r.stderr, /\[ERR_PENSTOCK_TENSOR_UNKNOWN_DTYPE\]/);
    assert.equal(run(noGpu, 'inspect').status, 2);
  });
});

describe('penstock load', () => {
  test('--host --verify --json: bytes, seconds, routes, and a sha256 per tensor equal to the file bytes', () => {
    const d = path.join(tmpDir(), `ld-${++n}`);
    const { index, tensors } = writeSharded(d, specs, 3);
    const r = run(noGpu, 'load', index, '--host', '--verify', '--json');
    assert.equal(r.status, 0, r.stderr);
    const j = JSON.parse(r.stdout);
    assert.equal(j.bytes, 1344);
    assert.equal(typeof j.seconds, 'number');
    assert.equal(j.routes['posix-host'].bytes, 1344);
    assert.equal(j.verified, true);
    for (const t of tensors) {
      const row = j.tensors.find((x: { name: string }) => x.name === t.name);
      assert.equal(row.sha256, crypto.createHash('sha256').update(t.data).digest('hex'));
      assert.deepEqual(row.shape, t.shape);
    }
  });

  test('into the (fake) GPU on a machine without a direct path: the staged route and why, in words; cuFile never opened', () => {
    const f = path.join(tmpDir(), `ld-${++n}.safetensors`);
    // Above the 16 KiB gdsThreshold, so that cuFile would be asked.
    writeSafetensors(f, [...specs, { name: 'lm_head', dtype: 'BF16', shape: [128, 128] }]);
    const opens = path.join(fs.mkdtempSync(path.join(tmpDir(), 'opens-')), 'opens.log');
    const r = run({ ...fakeGpu, FAKE_CUFILE_OPEN_LOG: opens }, 'load', f, '--device', '0', '--verify');
    assert.equal(r.status, 0, r.stderr);
    assert.equal(fs.existsSync(opens), false, "cuFile's driver was opened");
    assert.match(r.stdout, /^Loaded 4 tensors, 34112 bytes from 1 file\(s\) into GPU 0$/m);
    assert.match(r.stdout, /^Routes: posix-device \(1 ops, 34112 bytes\)$/m);
    const why = cufileNoDirectPath({ path: '/etc/cufile.json', found: false });
    assert.ok(r.stdout.split('\n').includes(`Why not GPUDirect Storage (${f}): [${why.code}] ${why.message}`), r.stdout);
    assert.match(r.stdout, /^Verified: all 4 tensors match their files/m);
    assert.match(r.stdout, /^Seconds: [\d.]+ {2}Throughput: [\d.]+ GB\/s$/m);
  });

  test('filters and rows from the command line; bad options', () => {
    const f = path.join(tmpDir(), `ld-${++n}.safetensors`);
    writeSafetensors(f, specs);
    const j = JSON.parse(run(noGpu, 'load', f, '--host', '--prefix', 'layers.', '--rows', '1/2', '--json').stdout);
    assert.deepEqual(j.tensors.map((t: { name: string; shape: number[] }) => [t.name, t.shape]), [['layers.0.q', [8, 16]], ['layers.0.norm', [16]]]);
    assert.equal(run(noGpu, 'load', f, '--host', '--rows', 'x').status, 2);
    assert.equal(run(noGpu, 'load', f, '--host', '--device', '0').status, 2);
    const missing = run(noGpu, 'load', f, '--host', '--names', 'embed,nope');
    assert.equal(missing.status, 1);
    assert.match(missing.stderr, /ERR_PENSTOCK_TENSOR_NOT_FOUND/);
    const nogpu = run(noGpu, 'load', f);
    assert.equal(nogpu.status, 1);
    assert.match(nogpu.stderr, /ERR_PENSTOCK_NO_CUDA/);
  });
});

describe('verification', () => {
  test('a changed byte in memory is found and named', async () => {
    const f = path.join(tmpDir(), `v-${++n}.safetensors`);
    writeSafetensors(f, specs);
    using set = await loadTensors(f, { host: true });
    (set.get('layers.0.q')!.data as Uint8Array)[5]! ^= 1;
    const checks = await verifyTensorSet(set);
    assert.deepEqual(checks.filter((c) => !c.match).map((c) => c.name), ['layers.0.q']);
    assert.throws(() => assertVerified(checks), { code: 'ERR_PENSTOCK_TENSOR_VERIFY_MISMATCH', message: /layers\.0\.q/ });
  });
});
