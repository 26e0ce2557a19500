/**
 * `--probe`: real reads in a child process. Against the fake CUDA driver and cuFile the whole
 * path runs (prediction, child, measured route, disagreement); stand-in probe scripts show that a
 * crash, a hang or garbage in the child becomes a finding and never takes the doctor down.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { fakeDriverDir, fakeSystemRoot, makeFile, repoRoot, tmpDir } from '../helpers.js';
import { diagnose, type DoctorReport, type PlatformFacts } from '../../src/doctor/index.js';
import { PROBE_MARK } from '../../src/doctor/types.js';

const MAIN = path.join(repoRoot, 'dist/src/cli/main.js');
const haveFake = fs.existsSync(path.join(fakeDriverDir, 'libcuda.so.1')) && fs.existsSync(path.join(fakeDriverDir, 'libcufile.so.0'));

function baseEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const k of Object.keys(env)) if (/^(PENSTOCK_|FAKE_|CUFILE_)/.test(k)) delete env[k];
  return env;
}

function fakeEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return {
    ...baseEnv(),
    PENSTOCK_CUDA_LIBRARY: path.join(fakeDriverDir, 'libcuda.so.1'),
    PENSTOCK_CUFILE_LIBRARY: path.join(fakeDriverDir, 'libcufile.so.0'),
    // A machine with nvidia-fs, so that penstock opens the fake cuFile.
    PENSTOCK_SYSTEM_ROOT: fakeSystemRoot({ nvidiaFs: true }),
    ...extra,
  };
}

function probeCli(target: string, env: NodeJS.ProcessEnv): DoctorReport {
  const r = spawnSync(process.execPath, [MAIN, 'doctor', '--json', '--probe', target], { env, encoding: 'utf8', timeout: 120_000 });
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout) as DoctorReport;
}

/** Facts that claim a GPU, so the doctor starts the probe; the probe itself finds out for real. */
const CLAIMS_GPU: PlatformFacts = {
  cuda: { loaded: true, path: 'libcuda.so.1', initialized: true, driverVersion: 12080, deviceCount: 1 },
  gpus: [{ ordinal: 0, name: 'NVIDIA H100', totalMemory: 80 * 2 ** 30, pciBusId: '0000:ff:00.0', computeCapability: [9, 0] }],
  cufile: { loaded: true, path: 'libcufile.so.0', version: 1150, driverOpen: true, statsLevel: 3 },
};

function script(name: string, body: string): string {
  const file = path.join(tmpDir(), `${name}.mjs`);
  fs.writeFileSync(file, body);
  return file;
}

describe('probe with the fake driver', { skip: haveFake ? false : 'the fake driver is not built (npm run build:fake)' }, () => {
  const { file } = makeFile(6 * 1024 * 1024);

  test('cuFile accepts the file: the measured route is gds, and a contrary prediction is flagged', () => {
    const rep = probeCli(file, fakeEnv());
    const p = rep.paths[0]!;
    assert.equal(p.probe?.status, 'measured');
    assert.equal(p.probe?.route, 'gds');
    assert.equal(p.probe?.bytes, 4 * 1024 * 1024, 'reads the first 4 MiB');
    assert.equal(p.probe?.routes?.gds?.bytes, 4 * 1024 * 1024);
    assert.equal(p.probe?.agrees, p.prediction.route === 'gds');
    const check = p.checks.find((c) => c.id === 'path.probe')!;
    if (p.prediction.route !== 'gds') {
      assert.equal(check.status, 'warn');
      assert.match(check.summary, new RegExp(`^measured gds, but predicted ${p.prediction.route}`));
      assert.match(p.verdict, new RegExp(`^gds measured, ${p.prediction.route} predicted: `));
      assert.equal(rep.allDirect, true, 'the measurement outranks the prediction');
    } else {
      assert.equal(check.status, 'pass');
    }
    assert.equal(rep.platform.find((c) => c.id === 'platform.cufile.driver')?.status, 'pass');
  });

  test('cuFile refuses the file (5027): penstock stages it and the reason is reported', () => {
    const p = probeCli(file, fakeEnv({ FAKE_CUFILE_REGISTER_ERROR: '5027' })).paths[0]!;
    assert.equal(p.probe?.route, 'posix-device');
    assert.equal(p.probe?.reason?.code, 'CUFILE_HANDLE_REFUSED');
    assert.equal(p.probe?.reason?.cufileNumber, 5027);
    assert.match(p.checks.find((c) => c.id === 'path.probe')!.summary, /fallback CUFILE_HANDLE_REFUSED CU_FILE_HANDLE_NOT_REGISTERED \(5027\)/);
  });

  test("cuFile in its own compat mode: measured cufile-compat", () => {
    const p = probeCli(file, fakeEnv({ FAKE_CUFILE_MODE: 'compat' })).paths[0]!;
    assert.equal(p.probe?.route, 'cufile-compat');
  });

  test('a directory: a temporary file is written, measured and removed', () => {
    const dir = fs.mkdtempSync(path.join(tmpDir(), 'probe-dir-'));
    const p = probeCli(dir, fakeEnv()).paths[0]!;
    assert.equal(p.probe?.status, 'measured');
    assert.equal(p.probe?.bytes, 4 * 1024 * 1024);
    assert.deepEqual(fs.readdirSync(dir), []);
  });

  test('a file under the GDS threshold shows nothing and says so', () => {
    const small = makeFile(4096).file;
    const p = probeCli(small, fakeEnv()).paths[0]!;
    assert.equal(p.probe?.status, 'skipped');
    assert.match(p.probe!.message, /under penstock's gdsThreshold/);
    assert.equal(p.probe?.agrees, undefined);
  });
});

describe('probe failures are findings', () => {
  const { file } = makeFile(64 * 1024);
  const opts = (probeScript: string, probeTimeoutMs = 30_000) => ({ probe: true, facts: CLAIMS_GPU, probeScript, probeTimeoutMs, env: baseEnv() });

  test('no GPU (facts say so): nothing is started', async () => {
    const noGpu: PlatformFacts = { ...CLAIMS_GPU, cuda: { loaded: false, path: 'libcuda.so.1', initialized: false, error: 'not here' }, gpus: [] };
    const r = await diagnose([file], { probe: true, facts: noGpu, env: baseEnv(), probeScript: script('never', 'process.exit(9)') });
    assert.deepEqual(r.paths[0]!.probe, { status: 'skipped', message: 'no GPU: nothing to measure' });
  });

  test('a path that does not exist is not probed (nothing is written to its directory)', async () => {
    const dir = fs.mkdtempSync(path.join(tmpDir(), 'absent-'));
    const r = await diagnose([path.join(dir, 'later.bin')], { probe: true, facts: CLAIMS_GPU, env: baseEnv(), probeScript: script('never2', 'process.exit(9)') });
    assert.deepEqual(r.paths[0]!.probe, { status: 'skipped', message: 'the path does not exist: nothing to measure' });
    assert.deepEqual(fs.readdirSync(dir), []);
  });

  test('no GPU (the real probe finds out itself): a clean skip', async () => {
    const env = { ...baseEnv(), PENSTOCK_CUDA_LIBRARY: path.join(tmpDir(), 'no-such-libcuda.so') };
    const r = await diagnose([file], { probe: true, facts: CLAIMS_GPU, env });
    assert.equal(r.paths[0]!.probe?.status, 'skipped');
    assert.equal(r.paths[0]!.probe?.message, 'no GPU: nothing to measure');
    assert.equal(r.paths[0]!.checks.find((c) => c.id === 'path.probe')!.status, 'info');
  });

  test('a crash (SIGSEGV) before any result', async () => {
    const r = await diagnose([file], opts(script('segv', "process.kill(process.pid, 'SIGSEGV');\nsetInterval(() => {}, 1000);\n")));
    const probe = r.paths[0]!.probe!;
    assert.equal(probe.status, 'crashed');
    assert.equal(probe.signal, 'SIGSEGV');
    assert.match(probe.message, /died of SIGSEGV before reporting/);
    const c = r.paths[0]!.checks.find((x) => x.id === 'path.probe')!;
    assert.equal(c.status, 'fail');
    assert.match(c.fix!, /PENSTOCK_COMPAT_MODE=on/);
  });

  test("a directory probe that crashes leaves no scratch file behind", async () => {
    const dir = fs.mkdtempSync(path.join(tmpDir(), 'crash-dir-'));
    const body = "import fs from 'node:fs';\nconst input = JSON.parse(process.argv[2]);\nfs.writeFileSync(input.path, 'x');\nprocess.kill(process.pid, 'SIGSEGV');\n";
    const r = await diagnose([dir], opts(script('segv-dir', body)));
    assert.equal(r.paths[0]!.probe!.status, 'crashed');
    assert.deepEqual(fs.readdirSync(dir), []);
  });

  test('a hang is killed at the timeout', async () => {
    const t0 = Date.now();
    const r = await diagnose([file], opts(script('hang', 'setInterval(() => {}, 1000);\n'), 500));
    assert.equal(r.paths[0]!.probe!.status, 'timeout');
    assert.match(r.paths[0]!.probe!.message, /longer than 500 ms/);
    assert.ok(Date.now() - t0 < 20_000);
  });

  test('a result followed by a crash at exit keeps the result and notes the crash', async () => {
    const result = { status: 'measured', message: 'read 65536 bytes', route: 'posix-device', bytes: 65536 };
    const body = `process.stdout.write('noise\\n' + ${JSON.stringify(PROBE_MARK)} + ${JSON.stringify(JSON.stringify(result))} + '\\n', () => process.kill(process.pid, 'SIGABRT'));\n`;
    const r = await diagnose([file], opts(script('late-abort', body)));
    const probe = r.paths[0]!.probe!;
    assert.equal(probe.status, 'measured');
    assert.equal(probe.route, 'posix-device');
    assert.equal(probe.signal, 'SIGABRT');
    assert.match(probe.message, /the probe then died of SIGABRT/);
  });

  test('an exit without a result, with what it said on stderr', async () => {
    const r = await diagnose([file], opts(script('garbage', "console.log('{not json');\nconsole.error('something broke');\nprocess.exit(2);\n")));
    const probe = r.paths[0]!.probe!;
    assert.equal(probe.status, 'crashed');
    assert.equal(probe.exitCode, 2);
    assert.match(probe.message, /exited with 2 without a result: something broke/);
  });
});
