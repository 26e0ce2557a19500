/**
 * `gdscheck -p` reports of several GDS releases' layouts (test/fixtures/doctor/gdscheck), read
 * into the doctor's checks; and cufile.log excerpts (test/fixtures/doctor/cufile-log) read into
 * cuFile's evidence.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { repoRoot } from '../helpers.js';
import { readGdscheck } from '../../src/doctor/gdscheck.js';
import { explainingLines, parseCuFileLog, predictedBy } from '../../src/doctor/cufile-log.js';
import type { Check } from '../../src/doctor/index.js';

const DIR = path.join(repoRoot, 'test/fixtures/doctor');
const report = (name: string) => readGdscheck(fs.readFileSync(path.join(DIR, 'gdscheck', name), 'utf8'), name);
const check = (checks: Check[], id: string) => {
  const c = checks.find((x) => x.id === id);
  assert.ok(c, `${id} present`);
  return c;
};

describe('gdscheck -p reports', () => {
  test('GDS 1.0: NVMe direct, two V100s, verification succeeded', () => {
    const r = report('gds-1.0-nvme.txt');
    assert.equal(r.parsed.gdsVersion, '1.0.1.3');
    assert.equal(r.parsed.nvfsVersion, '2.7');
    assert.equal(r.parsed.libcufileVersion, '2.4');
    assert.equal(r.parsed.drivers.NVMe, 'supported');
    assert.equal(r.parsed.rdma['Mellanox PeerDirect'], 'Enabled');
    assert.equal(r.parsed.config['fs.lustre.posix_gds_min_kb'], '0');
    assert.deepEqual(r.parsed.gpus.map((g) => [g.index, g.name, g.barMiB, g.supportsGds]), [[0, 'Tesla V100-SXM2-32GB', 32768, true], [1, 'Tesla V100-SXM2-32GB', 32768, true]]);
    assert.equal(check(r.checks, 'platform.cufile.driver').status, 'pass');
    assert.deepEqual(check(r.checks, 'platform.cufile.driver').data?.direct, ['NVMe']);
    assert.equal(check(r.checks, 'platform.nvidia_fs').status, 'pass');
    assert.equal(check(r.checks, 'platform.iommu').status, 'pass');
    assert.equal(check(r.checks, 'gdscheck.verification').status, 'pass');
    assert.deepEqual(r.parsed.unknown, []);
  });

  test('GDS 1.7: nvidia-fs loaded but NVMe unsupported: the NVMe driver is not registered', () => {
    const r = report('gds-1.7-nvme-unregistered.txt');
    const d = check(r.checks, 'platform.cufile.driver');
    assert.equal(d.status, 'fail');
    assert.match(d.fix!, /NVMe driver is not registered with nvidia-fs/);
    assert.equal(check(r.checks, 'platform.compat').data?.allowed, false);
    assert.equal(r.parsed.gpus[0]!.iommu, 'disabled');
    assert.equal(check(r.checks, 'platform.cuda.driver').data?.driverVersion, 12020);
    assert.match(check(r.checks, 'platform.nvidia.kernel_module').summary, /Open Driver/);
    assert.deepEqual(r.parsed.unknown, []);
  });

  test('GDS 1.14: P2PDMA instead of nvidia-fs', () => {
    const r = report('gds-1.14-p2pdma.txt');
    assert.equal(r.parsed.nvfsVersion, undefined);
    assert.equal(r.parsed.nvfsMinimum, '2.12');
    assert.equal(check(r.checks, 'platform.pci_p2pdma').status, 'pass');
    const nvfs = check(r.checks, 'platform.nvidia_fs');
    assert.equal(nvfs.status, 'info');
    assert.match(nvfs.summary, /P2PDMA path is set up instead/);
    assert.deepEqual(check(r.checks, 'platform.cufile.driver').data?.direct, ['NVMe P2PDMA']);
  });

  test('GDS 1.16: every back end compat, forced by the environment, IOMMU on, a POSIX threshold', () => {
    const r = report('gds-1.16-compat.txt');
    assert.equal(r.parsed.drivers.NVMe, 'compat');
    assert.equal(r.parsed.environment.CUFILE_LOGGING_LEVEL, 'TRACE');
    const d = check(r.checks, 'platform.cufile.driver');
    assert.equal(d.status, 'fail');
    assert.ok((d.data?.compat as string[]).includes('VIRTIOFS'));
    assert.equal(check(r.checks, 'platform.compat').status, 'fail');
    assert.equal(check(r.checks, 'platform.iommu').status, 'warn');
    assert.equal(check(r.checks, 'platform.nvidia_fs').status, 'fail');
    const s = check(r.checks, 'platform.cufile.settings');
    assert.match(s.summary, /fs\.lustre\.posix_gds_min_kb=64/);
    assert.match(s.summary, /max_device_pinned_mem_size_kb 33554432 exceeds BAR1 of GPU 0 \(16384 MiB\)/);
  });

  test('CRLF line ends and markdown bold from a pasted report are tolerated', () => {
    const text = fs.readFileSync(path.join(DIR, 'gdscheck', 'gds-1.0-nvme.txt'), 'utf8').replace('NVMe               : Supported', '**NVMe               : Supported**').replace(/\n/g, '\r\n');
    assert.equal(readGdscheck(text, 'pasted').parsed.drivers.NVMe, 'supported');
  });
});

describe('cufile.log', () => {
  const lines = parseCuFileLog(fs.readFileSync(path.join(DIR, 'cufile-log', 'dm-udev.log'), 'utf8'));

  test("lines in cuFile's format are parsed and others skipped", () => {
    assert.equal(lines.length, 9);
    assert.deepEqual(lines[1], { level: 'INFO', where: '0:1509', message: 'properties.use_pci_p2pdma : false' }, 'a setting dumped is not a cause');
    assert.equal(lines[2]!.code, undefined);
    assert.deepEqual(lines[4], { level: 'ERROR', where: 'cufio-fs:268', message: 'Unsupported block device: /dev/dm-0', code: 'DEVICE_MAPPER' });
  });

  test('the explaining lines come first, without repeats', () => {
    const shown = explainingLines(lines);
    assert.deepEqual(shown.map((l) => l.code), ['CUFILE_COMPAT_MODE', 'DEVICE_MAPPER', 'UDEV_NO_DATA', 'CUFILE_COMPAT_FOR_FILE']);
  });

  test('each cause is set against the prediction', () => {
    const [, dm, udev, outcome] = explainingLines(lines);
    assert.equal(predictedBy(dm!, ['DEVICE_MAPPER']), true);
    assert.equal(predictedBy(udev!, ['DEVICE_MAPPER']), false, 'the missing udev data was not predicted');
    assert.equal(predictedBy(udev!, ['NO_UDEV']), true);
    assert.equal(predictedBy(outcome!, []), undefined, 'an outcome, not a cause');
  });
});
