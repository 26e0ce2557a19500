/**
 * The tensor benchmark's own parts that need no GPU: its command line, which rows run where,
 * the ready line children write, runs becoming rows and the Markdown table, the timed spawn
 * and the hook that marks `penstock load`'s ready moment, and the tensors' sha256 on worker
 * threads. The library child itself runs once on the fake driver.
 */
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, it } from 'node:test';
import { fitsBudget, parseBenchArgs } from '../../bench/tensors-args.js';
import { compareHashes, fileTensorHashes, HashPool } from '../../bench/tensors-hash.js';
import { aggregate, formatReadyLine, parseOnly, parseReadyLines, plannedGroups, renderMarkdown, type RunRecord } from '../../bench/tensors-rows.js';
import { failure, runTimed } from '../../bench/tensors-spawn.js';
import { writeSafetensorsFile } from '../../bench/tensor-checkpoints.js';
import { moe512Shapes, sevenBF32Norms } from '../../bench/tensors-setup.js';
import { fakeDriverDir, pattern, repoRoot, tmpDir } from '../helpers.js';

describe('bench:tensors arguments', () => {
  it('has defaults: 3 repeats, cold as many, 7B with 16 layers, MoE 40×128, tmpfs in /dev/shm', () => {
    const o = parseBenchArgs([], {});
    assert.equal(o.repeats, 3);
    assert.equal(o.coldRepeats, 3);
    assert.equal(o.layers, 16);
    assert.equal(o.moeLayers, 40);
    assert.equal(o.moeExperts, 128);
    assert.equal(o.tmpfsDir, '/dev/shm/penstock-bench-tensors');
    assert.equal(o.python, 'python3');
    assert.equal(o.stopAfterS, undefined);
    assert.deepEqual(o.only, {});
  });

  it('reads every option', () => {
    const o = parseBenchArgs(['--dir', '/d', '--tmpfs-dir', 'none', '--out', '/o', '--peers', '.peers', '--python', 'py', '--only', '7B,cold,penstock-cli', '--repeats', '5', '--cold-repeats', '2', '--stop-after', '480', '--fresh', '--run-timeout', '60'], { PENSTOCK_PYTHON: 'ignored' });
    assert.equal(o.dir, '/d');
    assert.equal(o.tmpfsDir, undefined);
    assert.equal(o.out, '/o');
    assert.equal(o.peers, '.peers');
    assert.equal(o.python, 'py');
    assert.deepEqual(o.only, { checkpoints: ['7B'], states: ['cold'], methods: ['penstock-cli'] });
    assert.equal(o.repeats, 5);
    assert.equal(o.coldRepeats, 2);
    assert.equal(o.stopAfterS, 480);
    assert.equal(o.fresh, true);
    assert.equal(o.runTimeoutS, 60);
    assert.equal(parseBenchArgs([], { PENSTOCK_PYTHON: '/venv/bin/python' }).python, '/venv/bin/python');
  });

  it('refuses bad input with a sentence', () => {
    assert.throws(() => parseBenchArgs(['--repeats', '0']), /--repeats must be a whole number/);
    assert.throws(() => parseBenchArgs(['--repeats', '2x']), /--repeats/);
    assert.throws(() => parseBenchArgs(['--stop-after', '-1']), /--stop-after/);
    assert.throws(() => parseBenchArgs(['--write-only', '--report-only']), /exclude each other/);
    assert.throws(() => parseBenchArgs(['--only', 'penstock-fast']), /unknown method 'penstock-fast'/);
    assert.throws(() => parseBenchArgs(['stray']), /unexpected argument/);
    assert.throws(() => parseBenchArgs(['--no-such-option']));
  });

  it('lets a run start only if it ends inside the budget', () => {
    assert.equal(fitsBudget(100, 20, undefined), true);
    assert.equal(fitsBudget(100, 20, 120), true);
    assert.equal(fitsBudget(100, 20.5, 120), false);
  });
});

describe('bench:tensors rows', () => {
  it('plans every group by default, most wanted first; dd only cold on disk; the prepared row only warm', () => {
    const g = plannedGroups({});
    assert.deepEqual(g.map((x) => `${x.checkpoint} ${x.fs} ${x.state}`), ['7B disk warm', '7B disk cold', 'MoE disk warm', '7B tmpfs warm', 'MoE tmpfs warm', 'MoE disk cold']);
    assert.ok(g[0]!.methods.includes('penstock-prepared') && !g[0]!.methods.includes('dd-direct'));
    assert.ok(g[1]!.methods.includes('dd-direct') && g[1]!.methods.includes('dd-buffered') && !g[1]!.methods.includes('penstock-prepared'));
    assert.deepEqual(g[0]!.methods, ['penstock-cli', 'penstock-cli-compat', 'penstock-lib', 'penstock-prepared', 'load_file', 'fastsafetensors', 'instanttensor']);
  });

  it('narrows with --only: kinds combine, tokens of a kind are alternatives', () => {
    assert.deepEqual(plannedGroups(parseOnly('7B,disk,penstock')).map((x) => [x.state, x.methods]), [
      ['warm', ['penstock-cli', 'penstock-cli-compat', 'penstock-lib', 'penstock-prepared']],
      ['cold', ['penstock-cli', 'penstock-cli-compat', 'penstock-lib']],
    ]);
    assert.deepEqual(plannedGroups(parseOnly('dd')).map((x) => `${x.checkpoint} ${x.fs} ${x.state}`), ['7B disk cold', 'MoE disk cold']);
    assert.deepEqual(plannedGroups(parseOnly('tmpfs,cold')), []);
    assert.deepEqual(parseOnly('ext4,MoE-shaped,peers'), { fs: ['disk'], checkpoints: ['MoE'], methods: ['load_file', 'fastsafetensors', 'instanttensor'] });
  });

  it('frames the ready line: one line, found among others, a torn one left out', () => {
    const line = formatReadyLine({ sinceStartS: 1.25, loaderS: 0.5 });
    assert.ok(line.endsWith('\n') && line.split('\n').length === 2);
    const text = `noise\n${line}PENSTOCK_BENCH_READY {"sinceStartS": 2\n${formatReadyLine({ sinceStartS: 3 })}`;
    assert.deepEqual(parseReadyLines(text), [{ sinceStartS: 1.25, loaderS: 0.5 }, { sinceStartS: 3 }]);
  });

  const rec = (over: Partial<RunRecord>): RunRecord => ({ type: 'run', checkpoint: '7B', fs: 'disk', state: 'warm', method: 'penstock-cli', rep: 1, ok: true, bytes: 7e9, at: '', ...over });

  it('turns runs into rows: min and median of the good runs, checks summed, the later record of a repeat wins', () => {
    const rows = aggregate([
      rec({ rep: 1, wallReadyS: 9, loaderS: 9 }),
      rec({ rep: 1, wallReadyS: 1.0, wallExitS: 1.2, childReadyS: 0.95, loaderS: 0.5, residentBefore: 1 }),
      rec({ rep: 2, wallReadyS: 0.8, wallExitS: 1.0, childReadyS: 0.75, loaderS: 0.35, residentBefore: 0.999 }),
      rec({ rep: 3, ok: false, error: 'exit 1: boom' }),
      rec({ rep: 0, untimed: true, check: { compared: 147, mismatched: 0, missing: 0, how: 'verify' } }),
      rec({ method: 'load_file', rep: 1, loaderS: 1.5, check: { compared: 147, mismatched: 2, missing: 1, how: 'gpu' } }),
      rec({ state: 'cold', rep: 1, loaderS: 5, residentBefore: 0 }),
      rec({ state: 'cold', rep: 2, loaderS: 6, residentBefore: 0.004 }),
    ]);
    assert.equal(rows.length, 3);
    const cli = rows[0]!;
    assert.equal(cli.runs, 3);
    assert.equal(cli.ok, 2);
    assert.deepEqual(cli.wallReady, { min: 0.8, median: 0.9, n: 2 });
    assert.deepEqual(cli.loader, { min: 0.35, median: 0.425, n: 2 });
    assert.equal(cli.gbps, 7e9 / 0.425 / 1e9);
    assert.deepEqual(cli.check, { compared: 147, mismatched: 0, missing: 0, how: ['verify'] });
    assert.deepEqual(cli.errors, ['exit 1: boom']);
    assert.equal(cli.resident, 0.999);
    assert.equal(rows[2]!.resident, 0.004);
  });

  it('renders a Markdown table with a line per row, escaped cells, failed checks in bold and a legend', () => {
    const rows = aggregate([
      rec({ wallReadyS: 1, wallExitS: 1.1, childReadyS: 0.9, contextAtS: 0.3, loaderS: 0.5, route: 'posix-device 10 ops | x' }),
      rec({ method: 'load_file', loaderS: 1.5, check: { compared: 10, mismatched: 2, missing: 0, how: 'gpu' } }),
    ]);
    const md = renderMarkdown(rows, { diskFs: 'ext4', checkpoints: { '7B': '147 tensors' } });
    const lines = md.split('\n');
    assert.match(lines[0]!, /^\| checkpoint \| on \| state \| method \|.*\| notes \|$/);
    assert.equal(lines[0]!.split('|').length, lines[1]!.split('|').length);
    assert.match(lines[2]!, /^\| 7B \| ext4 \| warm \| penstock-cli \| 1\/1 \| 1\.000 \| 0\.900 \| 1\.100 \| 0\.300 \| 0\.500 \| 14\.00 \| not checked \|/);
    assert.ok(lines[2]!.includes('posix-device 10 ops \\| x'));
    assert.equal(lines[2]!.split(/(?<!\\)\|/).length, lines[0]!.split('|').length);
    assert.match(lines[3]!, /\*\*2 differ, 0 missing\*\* of 10/);
    assert.ok(md.includes('- **7B**: 147 tensors'));
    assert.ok(md.includes('- **penstock-cli**:') && md.includes('- **load_file**:') && !md.includes('- **dd-direct**'));
  });

  it('writes the layouts asked for: 7B with 147 tensors over 7 GB and F32 norms, MoE with over 15 000 tensors of 512 KiB over 7.5 GB', () => {
    const b7 = sevenBF32Norms(16);
    assert.equal(b7.length, 147);
    const bytes = (s: typeof b7) => s.reduce((a, t) => a + t.shape.reduce((x, y) => x * y, 1) * (t.dtype === 'F32' ? 4 : 2), 0);
    assert.ok(bytes(b7) >= 7e9);
    assert.ok(b7.filter((t) => t.name.endsWith('norm.weight')).every((t) => t.dtype === 'F32'));
    const moe = moe512Shapes(40, 128);
    assert.ok(moe.length >= 15000);
    assert.ok(bytes(moe) >= 7.5e9);
    assert.ok(moe.filter((t) => t.name.includes('.experts.')).every((t) => t.shape[0]! * t.shape[1]! * 2 === 512 * 1024));
  });
});

describe('bench:tensors processes and hashes', () => {
  it('times a child to its ready line on descriptor 3 and to its exit', async () => {
    const r = await runTimed(process.execPath, ['-e', `require('fs').writeSync(3, ${JSON.stringify(formatReadyLine({ sinceStartS: 0.1 }))}); setTimeout(() => process.exit(0), 50)`], { timeoutS: 30 });
    assert.equal(failure(r), undefined);
    assert.deepEqual(r.ready, { sinceStartS: 0.1 });
    assert.ok(r.wallReadyS !== undefined && r.wallReadyS <= r.wallExitS);
    const bad = await runTimed(process.execPath, ['-e', 'console.error("it broke"); process.exit(4)'], { timeoutS: 30 });
    assert.equal(bad.wallReadyS, undefined);
    assert.match(failure(bad)!, /^exit 4: it broke/);
    const gone = await runTimed('/nonexistent/program', [], { timeoutS: 30 });
    assert.match(failure(gone)!, /could not start/);
  });

  it("marks the first write to stdout of a process loaded with the ready hook", async () => {
    const hook = pathToFileURL(path.join(repoRoot, 'dist/bench/ready-hook.js')).href;
    const r = await runTimed(process.execPath, ['--import', hook, '-e', 'process.stdout.write("Seconds: 0.1\\n"); process.stdout.write("more\\n")'], { timeoutS: 30 });
    assert.equal(failure(r), undefined);
    assert.equal(r.stdout, 'Seconds: 0.1\nmore\n');
    assert.equal(typeof r.ready?.sinceStartS, 'number');
    assert.ok(r.ready!.sinceStartS! > 0);
  });

  it('hashes every tensor of a file on worker threads, and streams of bytes, equal to sha256 of the bytes', async () => {
    const dir = fs.mkdtempSync(path.join(tmpDir(), 'bench-tensors-'));
    const a = pattern(3 << 20, 7);
    const b = pattern(1000, 8);
    const file = path.join(dir, 'x.safetensors');
    writeSafetensorsFile(file, [{ name: 'a', dtype: 'U8', shape: [a.length], data: a }, { name: 'b', dtype: 'U8', shape: [b.length], data: b }, { name: 'e', dtype: 'U8', shape: [0], data: Buffer.alloc(0) }]);
    const sha = (x: Uint8Array) => crypto.createHash('sha256').update(x).digest('hex');
    const pool = new HashPool(3);
    try {
      const got = await fileTensorHashes(file, pool);
      assert.deepEqual(got, { a: sha(a), b: sha(b), e: sha(Buffer.alloc(0)) });
      const s = pool.stream(a.length);
      s.update(Buffer.from(a.subarray(0, 1 << 20)));
      s.update(Buffer.from(a.subarray(1 << 20)));
      assert.equal(await s.digest(), sha(a));
      assert.deepEqual(compareHashes({ a: sha(a), b: 'x' }, got), { compared: 2, mismatched: 1, missing: 1, firstBad: ['b', 'e'] });
    } finally {
      await pool.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('runs the library child on the fake driver: ready line, routes, and every tensor checked against the file', async () => {
    const dir = fs.mkdtempSync(path.join(tmpDir(), 'bench-tensors-'));
    const file = path.join(dir, 'm.safetensors');
    writeSafetensorsFile(file, [{ name: 'w', dtype: 'BF16', shape: [512, 256] }, { name: 'n', dtype: 'F32', shape: [256] }]);
    const pool = new HashPool(2);
    const ref = path.join(dir, 'ref.json');
    fs.writeFileSync(ref, JSON.stringify({ tensors: await fileTensorHashes(file, pool) }));
    await pool.close();
    const env = { ...process.env, PENSTOCK_CUDA_LIBRARY: path.join(fakeDriverDir, 'libcuda.so.1'), PENSTOCK_CUFILE_LIBRARY: path.join(fakeDriverDir, 'libcufile.so.0') };
    try {
      const r = await runTimed(process.execPath, [path.join(repoRoot, 'dist/bench/tensors-child.js'), file, '--mode', 'fresh', '--reference', ref], { env, timeoutS: 60 });
      assert.equal(failure(r), undefined, r.stderr);
      const j = JSON.parse(r.stdout.trim().split('\n').pop()!);
      assert.equal(j.ok, true, j.error);
      assert.equal(j.loads[0].bytes, 512 * 256 * 2 + 256 * 4);
      assert.deepEqual([j.check.compared, j.check.mismatched, j.check.missing], [2, 0, 0]);
      assert.ok(r.ready && typeof r.ready.loaderS === 'number' && typeof r.ready.contextAtS === 'number');
      assert.ok(r.ready.contextAtS! <= r.ready.sinceStartS!);
      // A reference that differs is caught.
      fs.writeFileSync(ref, JSON.stringify({ tensors: { w: '0'.repeat(64), n: '0'.repeat(64) } }));
      const bad = await runTimed(process.execPath, [path.join(repoRoot, 'dist/bench/tensors-child.js'), file, '--mode', 'prepared', '--repeat', '2', '--reference', ref], { env, timeoutS: 60 });
      const jb = JSON.parse(bad.stdout.trim().split('\n').pop()!);
      assert.equal(jb.loads.length, 2);
      assert.equal(jb.check.mismatched, 2);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
