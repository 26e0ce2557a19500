/** The `penstock` command's own subcommands: demo, info, help. */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { test } from 'node:test';
import { fakeDriverDir, repoRoot } from '../helpers.js';
import { demoModel, safetensorsHeader } from '../../src/cli/demo-checkpoint.js';

const cli = path.join(repoRoot, 'dist/src/cli/main.js');
const run = (...args: string[]) => spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', env: { ...process.env, PENSTOCK_CUDA_LIBRARY: '/nonexistent/libcuda.so.1' } });

test('demo writes a model-shaped checkpoint, loads it, verifies every tensor, and gives the route and the time from process start', () => {
  const r = run('demo', '--size', '8MiB');
  assert.equal(r.status, 0, r.stderr);
  const m = /^Checkpoint: (\d+) tensors \(BF16 and F32\), [\d.]+ MiB: a (\d+)-layer model of hidden size (\d+)$/m.exec(r.stdout);
  assert.ok(m, r.stdout);
  assert.equal(Number(m[1]), 3 + 9 * Number(m[2]));
  assert.match(r.stdout, /^Target: host memory \(no usable GPU here: .*\)$/m);
  assert.match(r.stdout, /^Route: posix-host \(\d+ ops, \d+ bytes\)$/m);
  assert.match(r.stdout, /^Why not GPUDirect Storage: the target is host memory/m);
  assert.match(r.stdout, /^Time: [\d.]+ s from process start to the tensors in host memory \(start-up [\d.]+ s, driver probe [\d.]+ s, load [\d.]+ s; writing the checkpoint not counted\)$/m);
  assert.match(r.stdout, new RegExp(`^Verified: all ${m[1]} tensors match the file`, 'm'));
});

test('demo into the (fake) GPU: GPU 0 memory, the staged route and why not the direct path', () => {
  const r = spawnSync(process.execPath, [cli, 'demo', '--size', '4MiB'], {
    encoding: 'utf8',
    env: { ...process.env, PENSTOCK_CUDA_LIBRARY: path.join(fakeDriverDir, 'libcuda.so.1'), PENSTOCK_CUFILE_LIBRARY: path.join(fakeDriverDir, 'libcufile.so.0') },
  });
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /^Target: GPU 0 memory$/m);
  assert.match(r.stdout, /^Route: posix-device \(\d+ ops, \d+ bytes\)/m);
  assert.match(r.stdout, /^Why not GPUDirect Storage: \[[A-Z_]+\] ./m);
  assert.match(r.stdout, /^Time: [\d.]+ s from process start to the tensors in GPU 0 memory \(start-up [\d.]+ s, GPU discovery/m);
  assert.match(r.stdout, /^Verified: all \d+ tensors match the file/m);
  const missing = spawnSync(process.execPath, [cli, 'demo', '--device', '0', '--size', '1MiB'], { encoding: 'utf8', env: { ...process.env, PENSTOCK_CUDA_LIBRARY: '/nonexistent/libcuda.so.1' } });
  assert.equal(missing.status, 1);
  assert.match(missing.stderr, /\[ERR_PENSTOCK_NO_CUDA\] No usable GPU: .*run the demo with --host/);
});

test('the demo checkpoint is model-shaped, about the size asked for, and parses as safetensors', () => {
  for (const size of [1 << 20, 32 << 20, 1 << 30]) {
    const model = demoModel(size);
    assert.ok(model.bytes <= size * 1.05 && model.bytes >= size * 0.5, `${size}: ${model.bytes}`);
    assert.ok(model.layers >= 1);
    assert.equal(model.tensors[0]!.name, 'model.embed_tokens.weight');
    assert.equal(model.tensors.at(-1)!.name, 'lm_head.weight');
    const header = safetensorsHeader(model);
    const json = JSON.parse(header.subarray(8).toString()) as Record<string, { data_offsets: [number, number] }>;
    assert.equal(Number(header.readBigUInt64LE(0)) % 8, 0);
    assert.equal(json['lm_head.weight']!.data_offsets[1], model.bytes);
  }
});

test('info --json reports what was found', () => {
  const r = run('info', '--json');
  assert.equal(r.status, 0, r.stderr);
  const info = JSON.parse(r.stdout) as { cuda: { loaded: boolean; error: string }; devices: unknown[]; settings: { taskSize: number } };
  assert.equal(info.cuda.loaded, false);
  assert.match(info.cuda.error, /nonexistent/);
  assert.deepEqual(info.devices, []);
  assert.equal(info.settings.taskSize, 4 << 20);
});

test('help, and unknown commands', () => {
  const help = run('--help');
  assert.equal(help.status, 0);
  assert.match(help.stdout, /^  doctor   /m);
  const bad = run('frobnicate');
  assert.equal(bad.status, 2);
  assert.match(bad.stderr, /unknown command 'frobnicate'/);
  const badOpt = run('demo', '--size', 'lots');
  assert.equal(badOpt.status, 2);
  assert.match(badOpt.stderr, /--size is not a size: 'lots'/);
});
