/** The `penstock` command's own subcommands: demo, info, help. */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { test } from 'node:test';
import { repoRoot } from './helpers.js';

const cli = path.join(repoRoot, 'dist/src/cli/main.js');
const run = (...args: string[]) => spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', env: { ...process.env, PENSTOCK_CUDA_LIBRARY: '/nonexistent/libcuda.so.1' } });

test('demo reads a sample file, verifies it and names the route', () => {
  const r = run('demo', '--size', '8MiB');
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /^Target: host memory \(no usable GPU here: .*\)$/m);
  assert.match(r.stdout, /^Route: posix-host \(\d+ ops, 8388608 bytes\)$/m);
  assert.match(r.stdout, /^Verified: yes, sha256 matches the file/m);
  assert.match(r.stdout, /^Bytes: 8388608 {2}Seconds: [\d.]+ {2}Throughput: [\d.]+ GB\/s/m);
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
