/**
 * The CLI's temporary files: created where nobody else can plant a name (a fresh mkdtemp
 * directory, O_EXCL | O_NOFOLLOW), never world-writable, and removed without touching anything
 * the run did not create.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { createPrivateDir, createPrivateFile } from '../../src/cli/private-file.js';
import { repoRoot } from '../helpers.js';

const cli = path.join(repoRoot, 'dist/src/cli/main.js');
const env = (tmp: string) => ({ ...process.env, TMPDIR: tmp, PENSTOCK_CUDA_LIBRARY: '/nonexistent/libcuda.so.1' });

function scratch(): { dir: string; victim: string; done: () => void } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'penstock-plant-'));
  const victim = path.join(dir, 'victim');
  fs.writeFileSync(victim, 'precious');
  return { dir, victim, done: () => fs.rmSync(dir, { recursive: true, force: true }) };
}

function exited(child: ReturnType<typeof spawn>): Promise<{ status: number | null; stderr: string }> {
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
  return new Promise((resolve) => child.on('close', (status) => resolve({ status, stderr })));
}

describe('CLI temporary files', () => {
  it('demo neither follows nor removes a symlink planted at a predictable name', async () => {
    const s = scratch();
    try {
      const tmp = path.join(s.dir, 'tmp');
      fs.mkdirSync(tmp);
      const child = spawn(process.execPath, [cli, 'demo', '--host', '--size', '1MiB'], { env: env(tmp), stdio: ['ignore', 'ignore', 'pipe'] });
      // The name a pid-based scheme would use, planted while the child is held stopped.
      process.kill(child.pid!, 'SIGSTOP');
      const planted = path.join(tmp, `penstock-demo-${child.pid}.bin`);
      fs.symlinkSync(s.victim, planted);
      process.kill(child.pid!, 'SIGCONT');
      const r = await exited(child);
      assert.equal(r.status, 0, r.stderr);
      assert.equal(fs.readFileSync(s.victim, 'utf8'), 'precious');
      assert.ok(fs.lstatSync(planted).isSymbolicLink(), 'the planted link is still there');
      assert.deepEqual(fs.readdirSync(tmp), [path.basename(planted)], 'the demo removed what it made, and only that');
    } finally {
      s.done();
    }
  });

  it('bench without FILE ignores symlinks planted over its name space', async () => {
    const s = scratch();
    try {
      const dir = path.join(s.dir, 'work');
      fs.mkdirSync(dir);
      const child = spawn(process.execPath, [cli, 'bench', '--host', '--size', '1MiB', '--repeat', '1', '--dir', dir, '--no-progress'], {
        env: env(s.dir),
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      // A pid- and time-based name (pid, then milliseconds): the child is held stopped while two
      // seconds of names after its release are planted, then let go at the start of that window.
      process.kill(child.pid!, 'SIGSTOP');
      const release = Date.now() + 2500;
      for (let t = release; t < release + 2000; t++) fs.symlinkSync(s.victim, path.join(dir, `penstock-bench-${child.pid}-${t.toString(36)}.dat`));
      while (Date.now() < release) await new Promise((resolve) => setTimeout(resolve, 10));
      process.kill(child.pid!, 'SIGCONT');
      const planted = fs.readdirSync(dir).length;
      const r = await exited(child);
      assert.equal(r.status, 0, r.stderr);
      assert.equal(fs.readFileSync(s.victim, 'utf8'), 'precious');
      assert.equal(fs.readdirSync(dir).length, planted, 'nothing planted was removed, nothing of the run was left');
    } finally {
      s.done();
    }
  });

  it('bench --op write FILE does not follow a dangling symlink at FILE', () => {
    const s = scratch();
    try {
      const target = path.join(s.dir, 'created-through-link');
      const file = path.join(s.dir, 'out.dat');
      fs.symlinkSync(target, file);
      const r = spawnSync(process.execPath, [cli, 'bench', file, '--op', 'write', '--host', '--size', '1MiB', '--repeat', '1'], { encoding: 'utf8', env: env(s.dir) });
      assert.equal(r.status, 2, r.stderr);
      assert.match(r.stderr, /exists; --op write only creates new files/);
      assert.equal(fs.existsSync(target), false, 'the link was not followed');
      assert.ok(fs.lstatSync(file).isSymbolicLink());
    } finally {
      s.done();
    }
  });

  it('bench --op write FILE creates FILE owner-writable only, and keeps it', () => {
    const s = scratch();
    try {
      const file = path.join(s.dir, 'out.dat');
      const r = spawnSync(process.execPath, [cli, 'bench', file, '--op', 'write', '--host', '--size', '1MiB', '--repeat', '1'], { encoding: 'utf8', env: env(s.dir) });
      assert.equal(r.status, 0, r.stderr);
      assert.equal(fs.statSync(file).size, 1 << 20);
      assert.equal(fs.statSync(file).mode & 0o022, 0, 'not group- or world-writable');
    } finally {
      s.done();
    }
  });

  for (const [what, args, signal, status] of [
    ['demo stopped by SIGINT while writing its checkpoint', ['demo', '--host', '--size', '1GiB'], 'SIGINT', 130],
    ['demo stopped by SIGTERM while writing its checkpoint', ['demo', '--host', '--size', '1GiB'], 'SIGTERM', 143],
    ['bench without FILE stopped by SIGTERM while creating its file', ['bench', '--host', '--size', '1GiB', '--repeat', '1'], 'SIGTERM', 143],
    ['bench without FILE stopped by SIGINT while creating its file', ['bench', '--host', '--size', '1GiB', '--repeat', '1'], 'SIGINT', 130],
  ] as const) {
    it(`${what} removes its temporary files`, async () => {
      const s = scratch();
      try {
        const tmp = path.join(s.dir, 'tmp');
        fs.mkdirSync(tmp);
        const child = spawn(process.execPath, [cli, ...args, ...(args[0] === 'bench' ? ['--dir', tmp] : [])], { env: env(tmp), stdio: ['ignore', 'ignore', 'pipe'] });
        const done = exited(child);
        // Signalled once its file holds data: the writing has started and is not finished.
        for (;;) {
          const file = fs.readdirSync(tmp).flatMap((d) => fs.readdirSync(path.join(tmp, d)).map((f) => path.join(tmp, d, f)))[0];
          if (file && fs.statSync(file).size > 0) break;
          await new Promise((resolve) => setTimeout(resolve, 5));
        }
        child.kill(signal);
        const r = await done;
        assert.equal(r.status, status, r.stderr);
        assert.deepEqual(fs.readdirSync(tmp), [], 'nothing of the run is left');
      } finally {
        s.done();
      }
    });
  }

  it('private files: mode 0600 in a 0700 directory, created exclusively, removed alone', () => {
    const s = scratch();
    try {
      const f = createPrivateFile('penstock-x-', 'data.bin', s.dir);
      assert.equal(fs.statSync(f.dir).mode & 0o777, 0o700);
      assert.equal(fs.statSync(f.path).mode & 0o777, 0o600);
      assert.throws(() => fs.openSync(f.path, fs.constants.O_CREAT | fs.constants.O_EXCL | fs.constants.O_WRONLY), { code: 'EEXIST' });
      f.remove();
      f.remove();
      assert.equal(fs.existsSync(f.dir), false);
      const d = createPrivateDir('penstock-y-', 'data.bin', s.dir);
      fs.writeFileSync(path.join(d.dir, 'someone-elses'), 'x');
      d.remove();
      assert.ok(fs.existsSync(path.join(d.dir, 'someone-elses')), 'what it did not create stays');
    } finally {
      s.done();
    }
  });
});
