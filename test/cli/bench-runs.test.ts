import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { dropFilePages } from '../../src/cli/bench/cold.js';
import { hasGpu } from '../../src/index.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const cli = path.resolve(here, '../../src/cli/main.js');

function penstock(args: string[]) {
  return spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', timeout: 120_000 });
}

describe('penstock bench (real runs)', () => {
  it('measures host reads of a file it creates, and removes the file', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'penstock-bench-test-'));
    try {
      const out = path.join(dir, 'out.json');
      const work = path.join(dir, 'work');
      fs.mkdirSync(work);
      const r = penstock(['bench', '--size', '8MiB', '--host', '--repeat', '2', '--threads', '1,2', '--out', out, '--dir', work]);
      assert.equal(r.status, 0, r.stderr + r.stdout);
      assert.match(r.stdout, /posix-host/);
      const report = JSON.parse(fs.readFileSync(out, 'utf8'));
      assert.equal(report.target, 'host');
      assert.equal(report.op, 'read');
      assert.equal(report.file.size, 8 * 1024 * 1024);
      assert.equal(report.results.length, 2);
      for (const res of report.results) {
        assert.equal(res.error, undefined);
        assert.ok(res.medianGBps > 0 && res.minGBps <= res.medianGBps && res.medianGBps <= res.maxGBps);
        assert.equal(res.samples.length, 2);
        assert.ok(res.routes['posix-host'].ops >= 2, JSON.stringify(res.routes));
        assert.equal(res.routes['posix-host'].bytes, 2 * 8 * 1024 * 1024);
        assert.equal(res.routes['posix-device'], undefined);
      }
      assert.deepEqual(report.results.map((x: { threads: number }) => x.threads), [1, 2]);
      assert.deepEqual(fs.readdirSync(work), [], 'the test file was removed');
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('measures host writes into a new file it is given, and keeps that file', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'penstock-bench-test-'));
    try {
      const file = path.join(dir, 'written.dat');
      const r = penstock(['bench', file, '--op', 'write', '--size', '4MiB', '--host', '--repeat', '2']);
      assert.equal(r.status, 0, r.stderr + r.stdout);
      assert.equal(fs.statSync(file).size, 4 * 1024 * 1024);
      const again = penstock(['bench', file, '--op', 'write', '--size', '4MiB', '--host']);
      assert.equal(again.status, 2);
      assert.match(again.stderr, /exists/);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('says to use the host target where there is no GPU', { skip: hasGpu() ? 'a GPU is present' : false }, () => {
    const r = penstock(['bench', '--device', '0', '--size', '1MiB']);
    assert.equal(r.status, 1);
    assert.match(r.stderr, /no GPU: use --host/);
  });

  it('exits 2 with a message on bad arguments', () => {
    const r = penstock(['bench', '--threads', 'many']);
    assert.equal(r.status, 2);
    assert.match(r.stderr, /--threads/);
    assert.equal(r.stdout, '');
  });

  it('drops a file from the page cache or says why not', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'penstock-cold-test-'));
    try {
      const file = path.join(dir, 'f');
      fs.writeFileSync(file, Buffer.alloc(1024 * 1024, 7));
      const d = dropFilePages(file);
      assert.equal(typeof d.method, 'string');
      assert.ok(d.dropped || d.problems.length > 0 || d.verified, JSON.stringify(d));
      if (d.dropped && d.verified) assert.ok(d.residentAfter! <= 64 * 1024);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
