/**
 * The probe's cuFile log: the probe runs with cuFile logging at TRACE into a private file, set in
 * a private copy of the cufile.json in effect and in the environment; the report quotes the lines
 * that explain the outcome beside the prediction. A stand-in probe plays cuFile here. The lines an
 * H200 VM without nvidia-fs logged (test/fixtures/doctor/cufile-log/h200-vm-no-nvidia-fs.log) are
 * judged against the prediction the doctor makes for such a machine (the gpu-vm tree).
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { makeFile, repoRoot, tmpDir } from '../helpers.js';
import { diagnose, render, type DoctorReport, type PlatformFacts, type Prediction } from '../../src/doctor/index.js';
import { explainingLines, parseCuFileLog, predictedBy, type CuFileLogLine } from '../../src/doctor/cufile-log.js';
import { judgeProbe } from '../../src/doctor/probe.js';
import type { CuFileDriverProps } from '../../src/addon/binding.js';

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

const FIXTURES = path.join(repoRoot, 'test/fixtures/doctor');
const H200_LOG = path.join(FIXTURES, 'cufile-log', 'h200-vm-no-nvidia-fs.log');

/** The cuFile driver's properties as penstock reads them; nvidia-fs 0.0 means it is not loaded. */
function props(nvfs: boolean, dstatusflags: number): CuFileDriverProps {
  return {
    nvfsMajor: nvfs ? 2 : 0, nvfsMinor: nvfs ? 17 : 0, pollThresholdKiB: 4, maxDirectIoKiB: 16384, dstatusflags,
    dcontrolflags: 2, fflags: 0, maxDeviceCacheKiB: 131072, perBufferCacheKiB: 1024, maxDevicePinnedKiB: 33554432, maxBatchIo: 128, maxBatchIoTimeoutMs: 5,
  };
}

/** One GPU with CUDA 13.0 and cuFile 1.15, as on the H200 VM, and the driver opened with `driverProps`. */
function gpuFacts(pciBusId: string, driverProps: CuFileDriverProps, name: string): PlatformFacts {
  return {
    cuda: { loaded: true, path: 'libcuda.so.1', initialized: true, driverVersion: 13000, deviceCount: 1 },
    gpus: [{ ordinal: 0, name, totalMemory: 150109880320, pciBusId, computeCapability: [9, 0] }],
    cufile: { loaded: true, path: 'libcufile.so.0', version: 1150, driverOpen: true, props: driverProps, statsLevel: 3 },
  };
}

/** The prediction the doctor makes for one file of a recorded machine. */
async function predictionFor(tree: string, file: string, facts: PlatformFacts): Promise<{ report: DoctorReport; prediction: Prediction }> {
  const report = await diagnose([file], { root: path.join(FIXTURES, tree), facts, env: {} });
  return { report, prediction: report.paths[0]!.prediction };
}

/** The probe's result on that VM (measured, staged by penstock after cuFile refused the file), with the fixture's lines. */
function probedWith(lines: CuFileLogLine[]) {
  return {
    status: 'measured' as const, message: 'read 4194304 bytes in 5.7 ms; cuFile open', route: 'posix-device' as const, bytes: 4194304,
    reason: { code: 'CUFILE_HANDLE_REFUSED', message: 'cuFile refused the file', cufileCode: 'CU_FILE_HANDLE_NOT_REGISTERED', cufileNumber: 5027 },
    cufileLines: lines,
  };
}

describe('cuFile on an H200 VM without nvidia-fs', () => {
  const all = parseCuFileLog(fs.readFileSync(H200_LOG, 'utf8'));
  const shown = explainingLines(all);
  const byWhere = (where: string) => {
    const l = all.find((x) => x.where === where);
    assert.ok(l, `the fixture has a line from ${where}`);
    return l;
  };
  const P2PDMA_LINES = ['cufio-cuda:571', 'cufio-drv:828', 'cufio-drv:792', 'cufio-drv:838', 'cufio-drv:253'];

  test('only lines that say P2PDMA is unavailable carry a P2PDMA code; dumps and notes carry none', () => {
    assert.equal(all.length, 12, 'the comment lines are skipped');
    assert.deepEqual(all.filter((l) => l.code === 'P2PDMA_UNSUPPORTED').map((l) => l.where), P2PDMA_LINES);
    assert.equal(byWhere('cufio-cuda:660').code, undefined, 'a TRACE note of the memory allocated to test for P2PDMA');
    assert.equal(byWhere('cufio-plat:412').code, undefined, "a dump of the GPU's attributes (PCIP2PDMACapable:0 among them)");
    assert.equal(byWhere('0:184').code, 'NO_NVIDIA_FS', 'no /proc/driver/nvidia-fs/devcount: nvidia-fs is not loaded');
    assert.equal(byWhere('cufio-udev:67').code, 'UDEV_NO_DATA');
    assert.ok(!shown.some((l) => l.where === 'cufio-cuda:660' || l.where === 'cufio-plat:412'), 'TRACE and DEBUG lines without a cause are not quoted');
    // The opposite statements carry no code.
    const says = (message: string) => parseCuFileLog(` 03-12-2026 09:15:02:101 [pid=1 tid=1] INFO   cufio-drv:838 ${message}\n`)[0]!.code;
    assert.equal(says('Is PCIP2PDMA Supported: 1 kernel Support: 1 pci_p2pdma_supported_cuda: 1 checkIfAllGPUsSupportP2PDMA(): 1'), undefined);
    assert.equal(says('NVMe P2PDMA        : Supported'), undefined);
  });

  test("against the doctor's prediction for that VM nothing is NOT PREDICTED; P2PDMA is predicted by NO_NVIDIA_FS", async () => {
    const { prediction } = await predictionFor('gpu-vm', '/root/model.bin', gpuFacts('0000:00:06.0', props(false, 0), 'NVIDIA H200'));
    const codes = prediction.blockers.map((b) => b.code);
    assert.deepEqual(codes, ['NO_UDEV', 'NO_NVIDIA_FS', 'EXT4_NOT_DATA_ORDERED', 'VIRTIO_DISK', 'CUFILE_NO_DIRECT_PATH']);
    const { result, logCheck } = judgeProbe(probedWith(shown), prediction);
    const evidence = result.cufileEvidence ?? [];
    assert.equal(evidence.length, 10);
    assert.deepEqual(evidence.filter((e) => e.predicted === false), [], 'no line names a cause the prediction missed');
    assert.equal(evidence.find((e) => e.line.startsWith('ERROR cufio-udev:67 '))?.predicted, true, 'the missing udev data was predicted (NO_UDEV)');
    assert.equal(evidence.find((e) => e.line.startsWith('WARN 0:184 '))?.predicted, true, 'the missing devcount file was predicted (NO_NVIDIA_FS)');
    const p2p = evidence.filter((e) => e.code === 'P2PDMA_UNSUPPORTED');
    assert.equal(p2p.length, 5);
    assert.ok(p2p.every((e) => e.predicted === true));
    // It is NO_NVIDIA_FS that predicts them: the rest of the prediction does not.
    const rest = codes.filter((c) => c !== 'NO_NVIDIA_FS');
    for (const where of P2PDMA_LINES) {
      assert.equal(predictedBy(byWhere(where), ['NO_NVIDIA_FS']), true);
      assert.notEqual(predictedBy(byWhere(where), rest), true);
    }
    assert.equal(logCheck?.status, 'info', 'nothing to act on beyond the prediction');
    assert.equal(logCheck?.fix, undefined);
    assert.doesNotMatch(logCheck!.summary, /NOT PREDICTED/);
  });

  test('with nvidia-fs loaded, P2PDMA being unavailable is no cause; with the doctor counting on P2PDMA it is a missed one', async () => {
    const NVME = 1 << 4;
    const { prediction } = await predictionFor('gds-nvme', '/data/model.bin', gpuFacts('00000000:83:00.0', props(true, NVME), 'NVIDIA H100 80GB HBM3'));
    assert.equal(prediction.route, 'gds', 'nvidia-fs carries the direct path');
    const p2pLines = shown.filter((l) => l.code === 'P2PDMA_UNSUPPORTED');
    const { result, logCheck } = judgeProbe({ ...probedWith(p2pLines), route: 'gds', reason: undefined }, prediction);
    assert.deepEqual(result.cufileEvidence?.map((e) => e.predicted), [undefined, undefined, undefined, undefined, undefined]);
    assert.equal(logCheck?.status, 'info');
    assert.equal(logCheck?.fix, undefined);
    // The same machine had the doctor found the P2PDMA path ready in place of nvidia-fs: cuFile contradicts it.
    const counted = judgeProbe(probedWith(p2pLines), { ...prediction, blockers: [] }, 'gds', { reliesOnP2pdma: true });
    assert.ok(counted.result.cufileEvidence?.every((e) => e.predicted === false));
    assert.equal(counted.logCheck?.status, 'warn');
    assert.match(counted.logCheck!.fix!, /missed \(P2PDMA_UNSUPPORTED\)/);
  });

  test('the report of a probe whose cuFile logged these lines marks none NOT PREDICTED', async () => {
    // A stand-in probe writes the fixture as cuFile's log; the prediction is this machine's own.
    const dir = tmpDir();
    const script = path.join(dir, 'stand-in.mjs');
    fs.writeFileSync(script, `import fs from 'node:fs';
fs.copyFileSync(process.env.H200_LOG, process.env.CUFILE_LOGFILE_PATH);
const input = JSON.parse(process.argv[2]);
process.stdout.write('penstock-probe-result ' + JSON.stringify({ status: 'measured', message: 'read ' + input.bytes, route: 'posix-device', bytes: input.bytes }) + '\\n');
`);
    const { file } = makeFile(1 << 20);
    const r = await diagnose([file], { probe: true, facts: CLAIMS_GPU, env: { H200_LOG, PATH: process.env.PATH ?? '' }, probeScript: script });
    const p = r.paths[0]!;
    const codes = p.prediction.blockers.map((b) => b.code);
    const noKernelPath = codes.includes('NO_NVIDIA_FS') || codes.includes('NO_NVIDIA_FS_DEVICES');
    const platform = (id: string) => r.platform.find((c) => c.id === id)?.data ?? {};
    const nvfsUsable = platform('platform.nvidia_fs').loaded === true && Number(platform('platform.nvidia_fs').devices) > 0;
    // Only a machine where the doctor found P2PDMA ready, and no nvidia-fs, counts on P2PDMA.
    const countsOnP2pdma = platform('platform.p2pdma.readiness').ready === true && !nvfsUsable;
    const expected = noKernelPath ? true : countsOnP2pdma ? false : undefined;
    const p2p = (p.probe?.cufileEvidence ?? []).filter((e) => e.code === 'P2PDMA_UNSUPPORTED');
    assert.equal(p2p.length, 5);
    for (const e of p2p) assert.equal(e.predicted, expected, e.line);
    const text = render(r, { colour: false });
    const mark = expected === true ? '  [predicted]' : expected === false ? '  [NOT PREDICTED]' : '';
    assert.ok(text.includes(`» INFO cufio-cuda:571 Config doesn't support PCIP2PDMA${mark}\n`), text);
    assert.doesNotMatch(text, /PCIP2PDMACapable|to check for P2PDMA Support/, 'the dump and the TRACE note are not quoted');
  });
});
