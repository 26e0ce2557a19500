/**
 * The doctor's pieces on their own: cufile.json comments, mount matching, PCIe distance, ACS,
 * and block-device layouts (md, NVMe multipath, NVMe-oF, IOMMU) built as small trees here.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { repoRoot, tmpDir } from '../helpers.js';
import { BASE, FACTS, tree } from './trees.js';
import { diagnose, type PlatformFacts } from '../../src/doctor/index.js';
import { stripJsonComments } from '../../src/system/cufile-json.js';
import { findMount, parseMounts } from '../../src/doctor/paths.js';
import { normalizeBdf, relation, type PciLocation } from '../../src/doctor/pci.js';
import { decodeBackends, formatVersion } from '../../src/doctor/platform.js';
import { ioUringCheck } from '../../src/doctor/io-uring.js';
import { SysRoot } from '../../src/system/sysfs.js';

describe('cufile.json comments', () => {
  test('comments go; slashes and quotes inside strings stay', () => {
    const text = '{\n  // line\n  "a": "http://x/*y*/", /* block\n over lines */ "b": "q\\"// not a comment",\n  "c": 1 // end\n}';
    const stripped = stripJsonComments(text);
    assert.deepEqual(JSON.parse(stripped), { a: 'http://x/*y*/', b: 'q"// not a comment', c: 1 });
    assert.equal(stripped.split('\n').length, text.split('\n').length, 'line numbers are kept for error messages');
  });

  test('an unreadable cufile.json is a warning; CUFILE_ENV_PATH_JSON picks another file', async () => {
    const root = tree('cfg', { ...BASE, 'etc/cufile.json': '{ "properties": { ', 'opt/my.json': '{ "properties": { "force_compat_mode": true } }' });
    const bad = await diagnose(['/'], { root, facts: FACTS, env: {} });
    const c = bad.platform.find((x) => x.id === 'platform.cufile.config')!;
    assert.equal(c.status, 'warn');
    assert.match(c.summary, /\/etc\/cufile\.json is not valid JSON/);
    const other = await diagnose(['/'], { root, facts: FACTS, env: { CUFILE_ENV_PATH_JSON: '/opt/my.json' } });
    const o = other.platform.find((x) => x.id === 'platform.cufile.config')!;
    assert.equal(o.data?.source, 'CUFILE_ENV_PATH_JSON');
    assert.equal(o.data?.force_compat_mode, true);
    assert.equal(other.platform.find((x) => x.id === 'platform.compat')!.data?.cufileForced, 'force_compat_mode in /opt/my.json');
    // The environment overrides the file.
    const envWins = await diagnose(['/'], { root, facts: FACTS, env: { CUFILE_ENV_PATH_JSON: '/opt/my.json', CUFILE_FORCE_COMPAT_MODE: 'false' } });
    assert.equal(envWins.platform.find((x) => x.id === 'platform.compat')!.data?.cufileForced, null);
  });
});

describe('small decoders', () => {
  test('PCI bus ids in the forms CUDA and tools print', () => {
    assert.equal(normalizeBdf('00000000:C1:00.0'), '0000:c1:00.0');
    assert.equal(normalizeBdf('0000:06:00.0'), '0000:06:00.0');
    assert.equal(normalizeBdf('06:00.0'), '0000:06:00.0');
    assert.equal(normalizeBdf('not a bus id'), undefined);
  });

  test('versions and back ends', () => {
    assert.equal(formatVersion(12080), '12.8');
    assert.equal(formatVersion(1150), '1.15');
    assert.deepEqual(decodeBackends((1 << 0) | (1 << 4) | (1 << 11) | (1 << 12)), ['LUSTRE', 'NVME', 'NVME_P2P', 'SCATEFS']);
    assert.deepEqual(decodeBackends(1 << 10), [], 'bit 10 names nothing');
  });

  test('mounts: escapes, the longest prefix, and later mounts hiding earlier ones', () => {
    const mounts = parseMounts('/dev/sda1 / ext4 rw 0 0\n/dev/nvme0n1 /data ext4 rw,data=ordered 0 0\n/dev/sdb /my\\040disk xfs rw 0 0\n/dev/nvme1n1 /data xfs rw 0 0\n');
    assert.equal(mounts[2]!.mountPoint, '/my disk');
    assert.equal(findMount(mounts, '/data/x')!.device, '/dev/nvme1n1');
    assert.equal(findMount(mounts, '/data2/x')!.device, '/dev/sda1', '/data is not a prefix of /data2');
    assert.equal(findMount(mounts, '/my disk/f')!.fsType, 'xfs');
    assert.equal(findMount(mounts, '/data')!.device, '/dev/nvme1n1');
  });

  test('PCIe distance in nvidia-smi terms', () => {
    const at = (hostBridge: string, chain: string[], numaNode?: number): PciLocation => ({ hostBridge, chain, devicePath: '/x', ...(numaNode !== undefined ? { numaNode } : {}) });
    const gpu = at('pci0000:00', ['0000:00:01.0', '0000:01:00.0', '0000:02:00.0', '0000:03:00.0']);
    assert.deepEqual(relation(gpu, at('pci0000:00', ['0000:00:01.0', '0000:01:00.0', '0000:02:04.0', '0000:04:00.0'])), {
      relation: 'PIX', bridges: ['0000:01:00.0', '0000:02:00.0', '0000:02:04.0'],
    });
    const deeper = at('pci0000:00', ['0000:00:01.0', '0000:01:00.0', '0000:02:08.0', '0000:05:00.0', '0000:06:00.0', '0000:07:00.0']);
    assert.equal(relation(gpu, deeper).relation, 'PXB');
    assert.equal(relation(gpu, at('pci0000:00', ['0000:00:02.0', '0000:08:00.0'])).relation, 'PHB');
    assert.equal(relation(at('pci0000:00', ['0000:00:01.0'], 0), at('pci0000:40', ['0000:40:01.0'], 0)).relation, 'NODE');
    assert.equal(relation(at('pci0000:00', ['0000:00:01.0'], 0), at('pci0000:80', ['0000:80:01.0'], 1)).relation, 'SYS');
  });
});

const GDS = path.join(repoRoot, 'test/fixtures/doctor/gds-nvme');
const GDS_FACTS: PlatformFacts = { ...FACTS, gpus: [{ ...FACTS.gpus[0]!, pciBusId: '0000:83:00.0' }] };
const SW = 'sys/devices/pci0000:80/0000:80:01.1/0000:81:00.0';

describe('changes to the GDS-ready host', () => {
  test('ACS redirect on a switch port is a warning naming the port', async () => {
    const config = fs.readFileSync(path.join(GDS, SW, '0000:82:01.0/config'));
    config.writeUInt16LE(0x001d, 0x108 + 6); // source validation, request and completion redirect, upstream forwarding
    const root = tree('acs', { [`${SW}/0000:82:01.0/config`]: config }, GDS);
    const r = await diagnose(['/data/model.bin'], { root, facts: GDS_FACTS, env: {} });
    const p = r.paths[0]!;
    assert.equal(p.prediction.route, 'gds');
    assert.deepEqual(p.prediction.warnings.map((w) => w.code), ['ACS_REDIRECT']);
    assert.match(p.prediction.warnings[0]!.message, /turn ACS off on 0000:82:01\.0/);
    const acs = p.checks.find((c) => c.id === 'path.acs')!;
    assert.equal(acs.status, 'warn');
    assert.equal((acs.data?.bridges as { control?: number }[])[2]!.control, 0x1d);
  });

  test('IOMMU: on is a warning, pass-through is fine', async () => {
    const on = tree('iommu-on', { 'sys/class/iommu/dmar0/.keep': '' }, GDS);
    const r = await diagnose(['/data/model.bin'], { root: on, facts: GDS_FACTS, env: {} });
    assert.equal(r.platform.find((c) => c.id === 'platform.iommu')!.status, 'warn');
    assert.deepEqual(r.paths[0]!.prediction.warnings.map((w) => w.code), ['IOMMU_ON']);
    const pt = tree('iommu-pt', { 'sys/class/iommu/dmar0/.keep': '', 'proc/cmdline': 'ro quiet intel_iommu=on iommu=pt\n' }, GDS);
    const r2 = await diagnose(['/data/model.bin'], { root: pt, facts: GDS_FACTS, env: {} });
    const c = r2.platform.find((x) => x.id === 'platform.iommu')!;
    assert.equal(c.data?.state, 'passthrough');
    assert.deepEqual(c.data?.cmdline, ['intel_iommu=on', 'iommu=pt']);
    assert.deepEqual(r2.paths[0]!.prediction.warnings, []);
  });

  test('udev knows the device but not its file system: cuFile refuses the file', async () => {
    const root = tree('udev-partial', { 'run/udev/data/b259:1': 'S:disk/by-id/nvme-x\nE:ID_FS_USAGE=filesystem\n' }, GDS);
    const r = await diagnose(['/data/model.bin'], { root, facts: GDS_FACTS, env: {} });
    const p = r.paths[0]!;
    assert.equal(p.prediction.route, 'posix-device');
    assert.deepEqual(p.prediction.blockers.map((b) => b.code), ['UDEV_NO_DATA']);
    assert.match(p.verdict, /udevadm trigger --action=change \/dev\/nvme0n1p1/);
    assert.match(p.checks.find((c) => c.id === 'path.udev')!.summary, /ID_FS_TYPE=\(missing\)/);
  });

  test('nvidia-fs loaded but its device nodes not visible (a container without --device)', async () => {
    const root = tree('no-nodes', {}, GDS);
    fs.rmSync(path.join(root, 'dev/nvidia-fs0'));
    const r = await diagnose(['/data/model.bin'], { root, facts: GDS_FACTS, env: {} });
    assert.deepEqual(r.paths[0]!.prediction.blockers.map((b) => b.code), ['NO_NVIDIA_FS_DEVICES']);
    assert.equal(r.platform.find((c) => c.id === 'platform.nvidia_fs')!.status, 'fail');
  });
});

describe('block layouts', () => {
  const NV0 = 'devices/pci0000:00/0000:00:01.0/0000:01:00.0';
  test('md over NVMe and a SATA disk: the SATA member blocks the direct path', async () => {
    const md = 'sys/devices/virtual/block/md0';
    const sda = 'sys/devices/pci0000:00/0000:00:17.0/ata1/host0/target0:0:0/0:0:0:0/block/sda';
    const base = {
      ...BASE,
      'proc/mounts': '/dev/md0 /raid xfs rw,relatime 0 0\n',
      'stat.json': JSON.stringify({ '/raid/f': { dev: '9:0' } }),
      'run/udev/data/b9:0': 'E:ID_FS_USAGE=filesystem\nE:ID_FS_TYPE=xfs\nE:MD_LEVEL=raid0\n',
      'sys/dev/block/9:0': { link: '../../devices/virtual/block/md0' },
      'sys/dev/block/259:0': { link: `../../${NV0}/nvme/nvme0/nvme0n1` },
      [`sys/${NV0}/nvme/nvme0/nvme0n1/dev`]: '259:0\n',
      [`${md}/slaves/nvme0n1`]: { link: `../../../../pci0000:00/0000:00:01.0/0000:01:00.0/nvme/nvme0/nvme0n1` },
    };
    const mixed = tree('md-mixed', {
      ...base,
      [`${md}/slaves/sda`]: { link: '../../../../pci0000:00/0000:00:17.0/ata1/host0/target0:0:0/0:0:0:0/block/sda' },
      [`${sda}/dev`]: '8:0\n',
      'sys/dev/block/8:0': { link: '../../devices/pci0000:00/0000:00:17.0/ata1/host0/target0:0:0/0:0:0:0/block/sda' },
    });
    const r = await diagnose(['/raid/f'], { root: mixed, facts: FACTS, env: {} });
    const p = r.paths[0]!;
    assert.equal(p.prediction.route, 'cufile-compat');
    assert.deepEqual(p.prediction.blockers.map((b) => b.code), ['MD_NOT_NVME']);
    assert.match(p.prediction.blockers[0]!.message, /md0 is an md array over sda \(scsi\)/);
    assert.match(p.checks.find((c) => c.id === 'path.block_device')!.summary, /^md0 \(md, 9:0\) over nvme0n1 \(nvme\), sda \(scsi\)$/);

    const allNvme = tree('md-nvme', base);
    const r2 = await diagnose(['/raid/f'], { root: allNvme, facts: FACTS, env: {} });
    assert.equal(r2.paths[0]!.prediction.route, 'gds');
  });

  test('NVMe with native multipath: the controller under the subsystem gives the PCI place', async () => {
    const subsys = 'sys/devices/virtual/nvme-subsystem/nvme-subsys0';
    const root = tree('multipath', {
      ...BASE,
      'proc/mounts': '/dev/nvme0n1 /fast xfs rw 0 0\n',
      'stat.json': JSON.stringify({ '/fast/f': { dev: '259:0' } }),
      'run/udev/data/b259:0': 'E:ID_FS_USAGE=filesystem\nE:ID_FS_TYPE=xfs\n',
      'sys/dev/block/259:0': { link: '../../devices/virtual/nvme-subsystem/nvme-subsys0/nvme0n1' },
      [`${subsys}/nvme0`]: { link: '../../../pci0000:00/0000:00:01.0/0000:02:00.0/nvme/nvme0' },
      'sys/devices/pci0000:00/0000:00:01.0/0000:02:00.0/nvme/nvme0/transport': 'pcie\n',
      'sys/bus/pci/devices/0000:01:00.0': { link: '../../../devices/pci0000:00/0000:00:02.0/0000:01:00.0' },
    });
    const r = await diagnose(['/fast/f'], { root, facts: FACTS, env: {} });
    const p = r.paths[0]!;
    assert.equal(p.prediction.route, 'gds');
    assert.equal(p.checks.find((c) => c.id === 'path.pcie')!.data?.relation, 'PHB');
    assert.deepEqual(p.prediction.warnings.map((w) => w.code), ['PCIE_NO_SHARED_SWITCH']);
  });

  test('NVMe over fabrics: recognised by the controller transport, direct when the driver supports it', async () => {
    const ctl = 'sys/devices/virtual/nvme-fabrics/ctl/nvme2';
    const files = {
      ...BASE,
      'proc/mounts': '/dev/nvme2n1 /remote xfs rw 0 0\n',
      'stat.json': JSON.stringify({ '/remote/f': { dev: '259:9' } }),
      'run/udev/data/b259:9': 'E:ID_FS_USAGE=filesystem\nE:ID_FS_TYPE=xfs\n',
      'sys/dev/block/259:9': { link: '../../devices/virtual/nvme-fabrics/ctl/nvme2/nvme2n1' },
      [`${ctl}/transport`]: 'rdma\n',
    };
    const r = await diagnose(['/remote/f'], { root: tree('nvmeof', files), facts: FACTS, env: {} });
    assert.equal(r.paths[0]!.checks.find((c) => c.id === 'path.block_device')!.data?.kind, 'nvme-of');
    assert.equal(r.paths[0]!.prediction.route, 'gds');
    const noOf = { ...FACTS, cufile: { ...FACTS.cufile, props: { ...FACTS.cufile.props!, dstatusflags: 1 << 4 } } };
    const r2 = await diagnose(['/remote/f'], { root: tree('nvmeof2', files), facts: noOf, env: {} });
    assert.deepEqual(r2.paths[0]!.prediction.blockers.map((b) => b.code), ['NVMEOF_NOT_SUPPORTED']);
  });
});

describe('io_uring for batched reads', () => {
  const root = (name: string, files: Record<string, string>) => new SysRoot(tree(name, files));
  const status = 'Name:\tnode\nSeccomp:\t0\nSeccomp_filters:\t0\n';

  test('allowed: a recent kernel, the sysctl at 0 (or absent), no seccomp filter', () => {
    const c = ioUringCheck(root('uring-ok', { 'proc/sys/kernel/io_uring_disabled': '0\n', 'proc/self/status': status }), '6.8.0-45-generic');
    assert.equal(c.status, 'pass');
    assert.deepEqual(c.data, { kernel: '6.8.0-45-generic', disabled: 0, seccomp: 0 });
    assert.equal(ioUringCheck(root('uring-no-sysctl', { 'proc/self/status': status }), '5.15.0').status, 'pass');
  });

  test('refused: a kernel before 5.6, or the sysctl at 1 or 2, warns with the fix', () => {
    const old = ioUringCheck(root('uring-old', { 'proc/self/status': status }), '5.4.0-150-generic');
    assert.equal(old.status, 'warn');
    assert.match(old.summary, /older than 5\.6/);
    const off = ioUringCheck(root('uring-off', { 'proc/sys/kernel/io_uring_disabled': '2\n', 'proc/self/status': status }), '6.8.0');
    assert.equal(off.status, 'warn');
    assert.match(off.fix ?? '', /io_uring_disabled=0/);
    const group = ioUringCheck(root('uring-group', { 'proc/sys/kernel/io_uring_disabled': '1\n', 'proc/self/status': status }), '6.8.0');
    assert.equal(group.status, 'warn');
    assert.match(group.summary, /io_uring_group/);
  });

  test('a seccomp filter may refuse it: said, not failed', () => {
    const c = ioUringCheck(root('uring-seccomp', { 'proc/sys/kernel/io_uring_disabled': '0\n', 'proc/self/status': 'Seccomp:\t2\n' }), '6.8.0');
    assert.equal(c.status, 'info');
    assert.equal(c.data?.seccomp, 2);
    assert.match(c.fix ?? '', /IO_URING_UNAVAILABLE/);
  });
});
