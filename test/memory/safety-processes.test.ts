/**
 * Exit paths and worker threads, each in a child process of its own (test/scenarios/safety.ts):
 * nothing a worker thread's end or the process's exit does may free memory under a task, stop
 * later frees, or leave the shared pool unusable for another thread.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { test } from 'node:test';
import { fakeDriverDir, fakeSystemRoot, makeFile, repoRoot } from '../helpers.js';

const script = path.join(repoRoot, 'dist/test/scenarios/safety.js');

function scenario(name: string, file: string, extra: string[] = [], env: Record<string, string> = {}) {
  const r = spawnSync(process.execPath, [script, name, file, ...extra], {
    env: {
      ...process.env,
      PENSTOCK_CUDA_LIBRARY: path.join(fakeDriverDir, 'libcuda.so.1'),
      PENSTOCK_CUFILE_LIBRARY: path.join(fakeDriverDir, 'libcufile.so.0'),
      PENSTOCK_SYSTEM_ROOT: fakeSystemRoot({ nvidiaFs: true }),
      ...env,
    },
    encoding: 'utf8',
    timeout: 120_000,
  });
  let json: Record<string, unknown> | undefined;
  try {
    json = JSON.parse(r.stdout.trim().split('\n').at(-1) ?? '');
  } catch {
    json = undefined;
  }
  return { status: r.status, signal: r.signal, stderr: r.stderr, json };
}

const { file } = makeFile(8 << 20);

for (const how of ['exit', 'throw', 'reject'] as const) {
  test(`leaving with staged device reads in flight (${how}): no crash, the exit status kept`, () => {
    for (let i = 0; i < 3; i++) {
      const r = scenario('exit-staged', file, [how], { FAKE_CUDA_ASYNC_DELAY_US: '2000' });
      assert.equal(r.signal, null, `killed by ${r.signal}: ${r.stderr}`);
      // Under npm run test:asan, a use after free here is a report that fails the run.
      assert.equal(r.status, how === 'exit' ? 0 : 1, r.stderr);
    }
  });
}

test('a worker terminated mid-read into its PinnedBuffer: the memory outlives the reads', () => {
  for (let i = 0; i < 3; i++) {
    const r = scenario('worker-pinned', file, [], { FAKE_CUDA_PINNED_UNMAP: '1' });
    assert.equal(r.signal, null, `killed by ${r.signal}: ${r.stderr}`);
    assert.equal(r.status, 0, r.stderr);
    assert.deepEqual(r.json, { after: 4096 });
  }
});

test('after a worker that loaded penstock exits, free() still frees pinned memory', () => {
  const r = scenario('worker-exit-then-free', file);
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(r.json, { leaked: 0 });
});

test("a worker resizing the shared pool neither breaks the main thread's staged reads nor waits for them", () => {
  const r = scenario('worker-resizes-pool', file);
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.json?.error, undefined);
  assert.equal(r.json?.first, 8 << 20);
  assert.equal(r.json?.workerBeforeStreamEnd, true, "the worker's configure() and GPU read waited for the main thread's stream");
});

test('when the file system refuses O_DIRECT mid-transfer, the record says buffered and why', () => {
  const preload = [process.env.LD_PRELOAD, path.join(fakeDriverDir, 'libdirect_einval.so')].filter(Boolean).join(' ');
  const r = scenario('direct-refused', file, [], { LD_PRELOAD: preload });
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(r.json, {
    readBytes: 8 << 20, readDirect: false, readFallbacks: ['DIRECT_IO_REFUSED'], same: true,
    writeBytes: 8 << 20, writeDirect: false, writeFallbacks: ['DIRECT_IO_REFUSED'], route: 'DIRECT_IO_REFUSED',
  });
});
