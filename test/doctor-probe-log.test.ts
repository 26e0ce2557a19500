/**
 * The probe's cuFile log: the probe runs with cuFile logging at TRACE into a private file, set in
 * a private copy of the cufile.json in effect and in the environment; the report quotes the lines
 * that explain the outcome beside the prediction. A stand-in probe plays cuFile here.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { makeFile, tmpDir } from './helpers.js';
import { diagnose, render, type PlatformFacts } from '../src/doctor/index.js';

const CLAIMS_GPU: PlatformFacts = {
  cuda: { loaded: true, path: 'libcuda.so.1', initialized: true, driverVersion: 12080, deviceCount: 1 },
  gpus: [{ ordinal: 0, name: 'NVIDIA H100', totalMemory: 80 * 2 ** 30, pciBusId: '0000:ff:00.0', computeCapability: [9, 0] }],
  cufile: { loaded: true, path: 'libcufile.so.0', version: 1150, driverOpen: true, statsLevel: 3 },
};

/** A probe that reports what cuFile's settings it was given and writes log lines where they say. */
const STAND_IN = `import fs from 'node:fs';
const cfg = JSON.parse(fs.readFileSync(process.env.CUFILE_ENV_PATH_JSON, 'utf8'));
const seen = { level: process.env.CUFILE_LOGGING_LEVEL, logfile: process.env.CUFILE_LOGFILE_PATH, cfg };
const stamp = ' 01-12-2026 10:00:01:101 [pid=' + process.pid + ' tid=' + process.pid + '] ';
fs.writeFileSync(process.env.CUFILE_LOGFILE_PATH, [
  stamp + 'NOTICE  cufio-drv:720 running in compatible mode',
  stamp + 'ERROR  cufio-udev:67 udev property not found: ID_FS_USAGE nvme0n1',
  stamp + 'ERROR  cufio-fs:199 NVMe Driver not registered with nvidia-fs!!!',
  stamp + 'TRACE  cufio-io:88 posix read size 65536 offset 0',
].join('\\n') + '\\n');
fs.writeFileSync(process.env.SEEN_FILE, JSON.stringify(seen));
const input = JSON.parse(process.argv[2]);
const result = { status: 'measured', message: 'read ' + input.bytes + ' at ' + input.offset, route: 'cufile-compat', bytes: input.bytes };
process.stdout.write('penstock-probe-result ' + JSON.stringify(result) + '\\n');
`;

describe("cuFile's own words beside the prediction", () => {
  test('the probe gets TRACE logging in a private file and config; the lines are quoted and judged', async () => {
    const dir = tmpDir();
    const script = path.join(dir, 'stand-in.mjs');
    fs.writeFileSync(script, STAND_IN);
    const userConfig = path.join(dir, 'user-cufile.json');
    fs.writeFileSync(userConfig, '{ // the operator\'s settings\n "properties": { "allow_compat_mode": true, "max_direct_io_size_kb": 4096 }, "logging": { "level": "ERROR" } }');
    const seenFile = path.join(dir, 'seen.json');
    const { file } = makeFile(1 << 20);
    const env = { CUFILE_ENV_PATH_JSON: userConfig, SEEN_FILE: seenFile, PATH: process.env.PATH ?? '' };
    const r = await diagnose([file], { probe: true, facts: CLAIMS_GPU, env, probeScript: script, shape: { offset: 8192, size: 65536 } });
    const p = r.paths[0]!;

    const seen = JSON.parse(fs.readFileSync(seenFile, 'utf8')) as { level: string; logfile: string; cfg: { logging: { level: string; dir: string }; properties: Record<string, unknown> } };
    assert.equal(seen.level, 'TRACE');
    assert.equal(seen.cfg.logging.level, 'TRACE');
    assert.equal(path.dirname(seen.logfile), seen.cfg.logging.dir, 'log file and logging.dir are the same private directory');
    assert.deepEqual(seen.cfg.properties, { allow_compat_mode: true, max_direct_io_size_kb: 4096 }, "the operator's settings are kept");
    assert.equal(fs.existsSync(seen.cfg.logging.dir), false, 'the private directory is removed');
    assert.equal(p.probe?.message, 'read 65536 at 8192', 'the probe reads the shape asked for');

    const evidence = p.probe?.cufileEvidence ?? [];
    assert.deepEqual(evidence.map((e) => e.code), ['CUFILE_COMPAT_MODE', 'UDEV_NO_DATA', 'NVME_NOT_SUPPORTED']);
    assert.match(evidence[2]!.line, /^ERROR cufio-fs:199 NVMe Driver not registered with nvidia-fs!!!$/);
    const predicted = new Set(p.prediction.blockers.map((b) => b.code));
    assert.equal(evidence[2]!.predicted, predicted.has('NVME_NOT_SUPPORTED'));
    const logCheck = p.checks.find((c) => c.id === 'path.cufile_log')!;
    assert.ok(logCheck);
    const text = render(r, { colour: false });
    assert.match(text, /» ERROR cufio-fs:199 NVMe Driver not registered with nvidia-fs!!!/);
    if (!predicted.has('NVME_NOT_SUPPORTED')) {
      assert.equal(logCheck.status, 'warn');
      assert.match(text, /NVMe Driver not registered with nvidia-fs!!! {2}\[NOT PREDICTED\]/);
    }
    // The measurement against the prediction for this read: shown as a mismatch when they differ.
    const probeCheck = p.checks.find((c) => c.id === 'path.probe')!;
    const expected = p.shape!.route === 'gds-bounce' ? 'gds' : p.shape!.route;
    if (expected !== 'cufile-compat') {
      assert.equal(p.probe?.agrees, false);
      assert.match(probeCheck.summary, new RegExp(`^measured cufile-compat, but predicted ${expected}`));
    } else assert.equal(p.probe?.agrees, true);
  });
});
