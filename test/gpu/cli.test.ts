/**
 * The command line on a real GPU: the demo loads its checkpoint into GPU 0 and verifies it,
 * `load --device` verifies every tensor from GPU memory, and a `--device` that is no GPU fails
 * with its code.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { deviceCount } from '../../src/index.js';
import { demoModel, safetensorsHeader } from '../../src/cli/demo-checkpoint.js';
import { repoRoot, tmpDir } from '../helpers.js';
import { gpuOrSkip } from './guard.js';

const cli = path.join(repoRoot, 'dist/src/cli/main.js');
const run = (args: string[], env: Record<string, string> = {}) => spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', env: { ...process.env, NO_COLOR: '1', ...env } });

/** A demo-shaped checkpoint of about `size` bytes with random data, written with plain fs. */
function checkpoint(size: number): string {
  const model = demoModel(size);
  const file = path.join(tmpDir(), `gpu-cli-${size}.safetensors`);
  const fd = fs.openSync(file, 'w');
  try {
    fs.writeSync(fd, safetensorsHeader(model));
    const piece = Buffer.alloc(8 << 20);
    for (let left = model.bytes; left > 0; left -= piece.length) fs.writeSync(fd, piece.fill(left & 0xff), 0, Math.min(left, piece.length));
  } finally {
    fs.closeSync(fd);
  }
  return file;
}

describe('penstock on a GPU', () => {
  test('demo: into GPU 0, every tensor verified, the route and the time from process start', (t) => {
    if (!gpuOrSkip(t)) return;
    const r = run(['demo']);
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /^Target: GPU 0 memory$/m);
    assert.match(r.stdout, /^Route: (gds|cufile-compat|cufile-unknown|posix-device|mapped-device) \(/m);
    assert.match(r.stdout, /^Time: [\d.]+ s from process start to the tensors in GPU 0 memory \(start-up [\d.]+ s, GPU discovery [\d.]+ s, load [\d.]+ s;/m);
    assert.match(r.stdout, /^Verified: all \d+ tensors match the file/m);
    if (!/^Route: gds /m.test(r.stdout)) assert.match(r.stdout, /^Why not GPUDirect Storage: \[[A-Z_]+\] /m);
  });

  test('load --device N --verify: exit 0, every tensor compared from GPU memory', (t) => {
    if (!gpuOrSkip(t)) return;
    const file = checkpoint(64 << 20);
    const last = deviceCount() - 1;
    const r = run(['load', file, '--device', String(last), '--verify', '--json']);
    assert.equal(r.status, 0, r.stderr);
    const j = JSON.parse(r.stdout) as { target: string; verified: boolean; tensors: { match: boolean }[] };
    assert.equal(j.target, `GPU ${last}`);
    assert.equal(j.verified, true);
    assert.ok(j.tensors.every((x) => x.match));
    const missing = run(['load', file, '--device', String(deviceCount())]);
    assert.equal(missing.status, 1);
    assert.match(missing.stderr, /ERR_PENSTOCK_INVALID_DEVICE/);
    assert.doesNotMatch(missing.stderr, /^hint: add --host/m);
  });
});
