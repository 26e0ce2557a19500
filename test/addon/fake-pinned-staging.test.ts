/**
 * Penstock's staging memory is pinned by registering memory it faulted in itself (fast, and in
 * parallel across workers); where the driver refuses registration, by the driver's own
 * allocation. Each case runs in a fresh process (a refusal is remembered per process), and the
 * fake driver logs every pinning call.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { fakeDriverDir, fakeSystemRoot, makeFile, newPath, repoRoot, sha256 } from '../helpers.js';

const THREADS = 4;
const BOUNCE_SETTING = 1 << 20;
// The setting is a worker's two halves; each half has two pages of slack.
const BOUNCE = 2 * (BOUNCE_SETTING / 2 + 2 * 4096);

function loadInChild(file: string, env: Record<string, string>): { sha: string; pinned: number; sharedWithChildren: number; log: string[] } {
  const log = newPath('pin-log');
  const script = `
    const p = await import(${JSON.stringify(path.join(repoRoot, 'dist/src/index.js'))});
    const { runtimeInfo } = await import(${JSON.stringify(path.join(repoRoot, 'dist/src/doctor.js'))});
    p.configure({ threads: ${THREADS}, bounceBufferSize: ${BOUNCE_SETTING}, compatMode: 'on' });
    const fs = await import('node:fs');
    // Registered ranges whose mapping is not kept out of forked children (VmFlags without 'dc').
    const sharedWithChildren = () => {
      const vmas = [];
      for (const line of fs.readFileSync('/proc/self/smaps', 'utf8').split('\\n')) {
        const m = /^([0-9a-f]+)-([0-9a-f]+) /.exec(line);
        if (m) vmas.push({ lo: BigInt('0x' + m[1]), hi: BigInt('0x' + m[2]), dc: false });
        else if (line.startsWith('VmFlags:')) vmas.at(-1).dc = line.split(' ').includes('dc');
      }
      const regs = fs.readFileSync(process.env.FAKE_CUDA_PIN_LOG, 'utf8').split('\\n').filter((l) => l.startsWith('cuMemHostRegister')).map((l) => BigInt(l.split(' ')[2]));
      return regs.filter((at) => !vmas.some((v) => v.lo <= at && at < v.hi && v.dc)).length;
    };
    const f = await p.open(process.argv[1]);
    const buf = p.DeviceBuffer.alloc((await import('node:fs')).statSync(process.argv[1]).size);
    await f.read(buf);
    const bytes = await buf.toBuffer();
    buf.free();
    await f.close();
    const crypto = await import('node:crypto');
    process.stdout.write(JSON.stringify({ sha: crypto.createHash('sha256').update(bytes).digest('hex'), pinned: runtimeInfo().pinnedBytes, sharedWithChildren: sharedWithChildren() }));
  `;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', script, file], {
    encoding: 'utf8',
    env: {
      ...process.env,
      PENSTOCK_CUDA_LIBRARY: path.join(fakeDriverDir, 'libcuda.so.1'),
      PENSTOCK_CUFILE_LIBRARY: path.join(fakeDriverDir, 'libcufile.so.0'),
      PENSTOCK_SYSTEM_ROOT: fakeSystemRoot({ nvidiaFs: false }),
      FAKE_CUDA_PIN_LOG: log,
      ...env,
    },
  });
  assert.equal(r.status, 0, r.stderr);
  const lines = fs.existsSync(log) ? fs.readFileSync(log, 'utf8').trim().split('\n').filter(Boolean) : [];
  return { ...JSON.parse(r.stdout), log: lines };
}

describe('staging memory is pinned', () => {
  // Large enough that every worker stages some of it.
  const { file, data } = makeFile(THREADS * 6 * BOUNCE_SETTING + 12345);

  test('by registering memory penstock faulted in, one buffer per worker, bytes exact', () => {
    const got = loadInChild(file, {});
    assert.equal(got.sha, sha256(data));
    assert.ok(!got.log.some((l) => l.startsWith('cuMemHostAlloc')), got.log.join('; '));
    const bounces = got.log.filter((l) => l.startsWith(`cuMemHostRegister ${BOUNCE} `));
    assert.ok(bounces.length >= 1 && bounces.length <= THREADS, got.log.join('; '));
    assert.ok(got.pinned >= bounces.length * BOUNCE, `pinned ${got.pinned}`);
    // Every registered buffer is kept out of child processes (a fork must not share its pages).
    assert.equal(got.sharedWithChildren, 0);
  });

  test('by the driver’s allocation where registration is refused, asked once per process, bytes exact', () => {
    const got = loadInChild(file, { FAKE_CUDA_HOST_REGISTER_FAIL: '1' });
    assert.equal(got.sha, sha256(data));
    assert.equal(got.log.filter((l) => l.startsWith('cuMemHostRegister')).length, 1, got.log.join('; '));
    const bounces = got.log.filter((l) => l === `cuMemHostAlloc ${BOUNCE}`);
    assert.ok(bounces.length >= 1 && bounces.length <= THREADS, got.log.join('; '));
    assert.ok(got.pinned >= bounces.length * BOUNCE, `pinned ${got.pinned}`);
  });
});
