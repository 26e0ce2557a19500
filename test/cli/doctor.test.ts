/**
 * `penstock doctor` as a command against this machine's real /proc and /sys (and once against a
 * recorded tree through PENSTOCK_DOCTOR_ROOT): exit codes, JSON and the text report.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { makeFile, repoRoot, tmpDir } from '../helpers.js';
import type { Check, DoctorReport } from '../../src/doctor/index.js';
import { hasGpu } from '../../src/addon/runtime.js';

const MAIN = path.join(repoRoot, 'dist/src/cli/main.js');

/** This process's environment without anything that points penstock at a fake driver. */
function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const k of Object.keys(env)) if (/^(PENSTOCK_|FAKE_|CUFILE_)/.test(k) || k === 'NO_COLOR') delete env[k];
  return { ...env, ...extra };
}

function doctor(args: string[], options: { env?: NodeJS.ProcessEnv; cwd?: string } = {}) {
  const r = spawnSync(process.execPath, [MAIN, 'doctor', ...args], { env: options.env ?? cleanEnv(), cwd: options.cwd ?? repoRoot, encoding: 'utf8', timeout: 120_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

const find = (checks: Check[], id: string) => {
  const c = checks.find((x) => x.id === id);
  assert.ok(c, `check ${id} present`);
  return c;
};

describe('penstock doctor on this machine', () => {
  const { file } = makeFile(64 * 1024);
  let report: DoctorReport;
  let code: number | null;

  test('--json: exit 0 and a report with the stable ids', () => {
    const r = doctor(['--json', file]);
    code = r.code;
    assert.equal(r.code, 0, r.stderr);
    report = JSON.parse(r.stdout) as DoctorReport;
    assert.equal(report.schema, 1);
    assert.equal(report.root, '/');
    const ids = report.platform.map((c) => c.id);
    for (const id of ['platform.kernel', 'platform.cuda.driver', 'platform.gpus', 'platform.cufile.library', 'platform.cufile.driver', 'platform.nvidia_fs',
      'platform.pci_p2pdma', 'platform.cufile.config', 'platform.compat', 'platform.env', 'platform.udev', 'platform.iommu', 'platform.container', 'platform.vm'])
      assert.ok(ids.includes(id), `${id} in ${ids.join(', ')}`);
    const p = report.paths[0]!;
    assert.equal(p.path, file);
    assert.equal(p.resolved, fs.realpathSync(file));
    for (const id of ['path.exists', 'path.mount', 'path.fs.supported', 'path.block_device', 'path.udev', 'path.o_direct', 'path.pcie', 'path.route'])
      assert.ok(p.checks.some((c) => c.id === id), `${id} present`);
    assert.equal(find(p.checks, 'path.exists').data?.type, 'file');
  });

  test('reports the CUDA driver as it is here, cleanly', () => {
    const cuda = find(report.platform, 'platform.cuda.driver');
    const p = report.paths[0]!;
    if (!hasGpu()) {
      assert.equal(cuda.status, 'fail');
      assert.match(cuda.summary, /^not usable: /);
      assert.ok(cuda.fix);
      assert.equal(p.prediction.route, 'posix-host');
      assert.equal(p.prediction.blockers[0]!.code, 'NO_CUDA');
      assert.match(p.verdict, /^posix-host /);
    } else {
      assert.equal(cuda.status, 'pass');
      assert.notEqual(p.prediction.route, 'posix-host');
    }
  });

  test('the facts about the file agree with what this process sees', () => {
    const p = report.paths[0]!;
    const od = find(p.checks, 'path.o_direct');
    let expected: string;
    try {
      fs.closeSync(fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_DIRECT));
      expected = 'ok';
    } catch (err) {
      expected = (err as NodeJS.ErrnoException).code === 'EINVAL' ? 'refused' : 'untested';
    }
    assert.equal(od.data?.state, expected);
    const dev = fs.statSync(file, { bigint: true }).dev;
    const majmin = `${Number((dev >> 8n) & 0xfffn)}:${Number((dev & 0xffn) | ((dev >> 12n) & ~0xffn))}`;
    const block = find(p.checks, 'path.block_device');
    if (fs.existsSync(`/sys/dev/block/${majmin}`)) assert.equal(block.data?.majmin, majmin);
    const mount = find(p.checks, 'path.mount').data as { mountPoint: string };
    assert.ok(p.resolved === mount.mountPoint || p.resolved.startsWith(mount.mountPoint === '/' ? '/' : mount.mountPoint + '/'));
  });

  test('--require-gds exits 3 exactly when a path would miss the direct path', () => {
    const r = doctor(['--json', '--require-gds', file]);
    const again = JSON.parse(r.stdout) as DoctorReport;
    assert.equal(r.code, again.allDirect ? 0 : 3);
    assert.equal(code, 0, 'without --require-gds the route does not change the exit code');
  });

  test('the text report: grouped, marked, a verdict per path, no colour when not a terminal', () => {
    const r = doctor([file, path.dirname(file)]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^penstock doctor$/m);
    assert.match(r.stdout, /^Platform$/m);
    assert.match(r.stdout, /^ {2}[✓✗!·] CUDA driver {9}/m);
    assert.equal(r.stdout.match(/^ {2}Verdict: /gm)?.length, 2);
    assert.doesNotMatch(r.stdout, /\x1b\[/);
  });

  test('without a PATH it examines the current directory', () => {
    const dir = tmpDir();
    const r = doctor(['--json'], { cwd: dir });
    assert.equal(r.code, 0, r.stderr);
    const rep = JSON.parse(r.stdout) as DoctorReport;
    assert.equal(rep.paths.length, 1);
    assert.equal(rep.paths[0]!.path, '.');
    assert.equal(rep.paths[0]!.resolved, fs.realpathSync(dir));
    assert.equal(find(rep.paths[0]!.checks, 'path.exists').data?.type, 'directory');
  });

  test('an unknown option is a usage error: exit 2 with usage', () => {
    const r = doctor(['--frobnicate']);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /unknown option '--frobnicate'/);
    assert.match(r.stderr, /penstock doctor --help/);
  });

  test('PENSTOCK_DOCTOR_ROOT reads a recorded machine instead', () => {
    const root = path.join(repoRoot, 'test/fixtures/doctor/gds-nvme');
    const r = doctor(['--json', '/data/model.bin'], { env: cleanEnv({ PENSTOCK_DOCTOR_ROOT: root }) });
    assert.equal(r.code, 0, r.stderr);
    const rep = JSON.parse(r.stdout) as DoctorReport;
    assert.equal(rep.root, root);
    const p = rep.paths[0]!;
    assert.equal(find(p.checks, 'path.block_device').data?.name, 'nvme0n1p1');
    assert.equal(find(p.checks, 'path.mount').data?.mountPoint, '/data');
    assert.equal(find(rep.platform, 'platform.nvidia_fs').status, 'pass');
    assert.equal(find(rep.platform, 'platform.env').data?.PENSTOCK_DOCTOR_ROOT, root);
  });
});

describe('penstock doctor: conventions', () => {
  const GDSCHECK = path.join(repoRoot, 'test/fixtures/doctor/gdscheck/gds-1.7-nvme-unregistered.txt');
  const run = (args: string[], input?: string) => {
    const r = spawnSync(process.execPath, [MAIN, 'doctor', ...args], { env: cleanEnv(), cwd: repoRoot, encoding: 'utf8', timeout: 120_000, ...(input !== undefined ? { input } : {}) });
    return { code: r.status, stdout: r.stdout, stderr: r.stderr };
  };

  test('--help: exit 0, every line under 80 columns, the exit statuses stated', () => {
    const r = run(['--help']);
    assert.equal(r.code, 0);
    assert.match(r.stdout, /^Usage: penstock doctor/);
    for (const line of r.stdout.split('\n')) assert.ok(line.length < 80, `under 80 columns: ${line}`);
    assert.match(r.stdout, /^Exit status:\n  0 +success\n  1 +failure: a path does not exist, a PENSTOCK_\* variable is unusable/m);
    assert.match(r.stdout, /^  3 +--require-gds: a path misses the direct path$/m);
    assert.equal(run(['-h']).stdout, r.stdout);
  });

  test('a path that does not exist: reported, exit 1', () => {
    const missing = path.join(tmpDir(), 'no-such-file.bin');
    const r = run(['--json', missing]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, new RegExp(`${missing.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: no such file or directory`));
    const rep = JSON.parse(r.stdout) as DoctorReport;
    assert.equal(find(rep.paths[0]!.checks, 'path.exists').data?.exists, false);
  });

  test('bad numbers and conflicting options are usage errors: exit 2', () => {
    assert.equal(run(['--offset', 'soon', '.']).code, 2);
    assert.equal(run(['--size', '-5', '.']).code, 2);
    assert.equal(run(['--gdscheck', GDSCHECK, '.']).code, 2);
  });

  test('--offset and --size predict that read', () => {
    const { file } = makeFile(1 << 20);
    const r = run(['--json', '--offset', '4097', '--size', '64KiB', file]);
    assert.equal(r.code, 0, r.stderr);
    const p = (JSON.parse(r.stdout) as DoctorReport).paths[0]!;
    assert.equal(p.shape?.offset, 4097);
    assert.equal(p.shape?.size, 65536);
    assert.ok(find(p.checks, 'path.shape'));
  });

  test('--gdscheck FILE and --gdscheck - (stdin)', () => {
    const r = run(['--gdscheck', GDSCHECK]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^penstock doctor --gdscheck \(.*gds-1\.7-nvme-unregistered\.txt, GDS 1\.7\.1\.12\)$/m);
    assert.match(r.stdout, /✗ cuFile back ends {4}direct: none/);
    const j = run(['--gdscheck', '-', '--json'], fs.readFileSync(GDSCHECK, 'utf8'));
    assert.equal(j.code, 0, j.stderr);
    const rep = JSON.parse(j.stdout) as { source: string; checks: Check[] };
    assert.equal(rep.source, 'stdin');
    assert.equal(find(rep.checks, 'platform.nvidia_fs').status, 'pass');
    assert.equal(run(['--gdscheck', '-', '--require-gds'], fs.readFileSync(GDSCHECK, 'utf8')).code, 3);
    const junk = run(['--gdscheck', '-'], 'hello\n');
    assert.equal(junk.code, 1);
    assert.match(junk.stderr, /does not look like gdscheck -p output/);
    assert.equal(run(['--gdscheck', path.join(tmpDir(), 'absent.txt')]).code, 1);
  });
});
