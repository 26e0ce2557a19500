/**
 * The causes of a GDS fallback beyond the first checks, each in a tree of its own built on the
 * GDS-ready host (test/fixtures/doctor/gds-nvme) or from scratch: the verdict and the fix the
 * doctor prints are asserted for every one.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { describe, test } from 'node:test';
import { repoRoot } from '../helpers.js';
import { BASE, FACTS, tree, type TreeEntry } from './trees.js';
import { diagnose, type DiagnoseOptions, type PathReport, type PlatformFacts } from '../../src/doctor/index.js';

const GDS = path.join(repoRoot, 'test/fixtures/doctor/gds-nvme');
const GDS_FACTS: PlatformFacts = { ...FACTS, gpus: [{ ...FACTS.gpus[0]!, pciBusId: '0000:83:00.0' }] };
const NVME_DISK = 'sys/devices/pci0000:80/0000:80:01.1/0000:81:00.0/0000:82:01.0/0000:84:00.0/nvme/nvme0/nvme0n1';
const NV0 = 'devices/pci0000:00/0000:00:01.0/0000:01:00.0/nvme/nvme0/nvme0n1';

async function one(name: string, files: Record<string, TreeEntry>, opts: Partial<DiagnoseOptions> & { from?: string; file?: string } = {}): Promise<{ p: PathReport; platform: Awaited<ReturnType<typeof diagnose>>['platform'] }> {
  const root = tree(name, files, opts.from);
  const r = await diagnose([opts.file ?? '/data/model.bin'], { root, facts: opts.facts ?? GDS_FACTS, env: opts.env ?? {}, ...(opts.shape ? { shape: opts.shape } : {}) });
  return { p: r.paths[0]!, platform: r.platform };
}
const codes = (p: PathReport) => p.prediction.blockers.map((b) => b.code);
const fixOf = (p: PathReport, id: string) => p.checks.find((c) => c.id === id)?.fix ?? '';

/** An xfs volume on DEV (MAJ:MIN) whose sysfs entry is `sys`, with extra files. */
function volume(dev: string, majmin: string, sys: string, extra: Record<string, TreeEntry> = {}): Record<string, TreeEntry> {
  return {
    ...BASE,
    'proc/mounts': `/dev/${dev} /data xfs rw,relatime 0 0\n`,
    'stat.json': JSON.stringify({ '/data/model.bin': { dev: majmin, size: 1 << 30 } }),
    [`run/udev/data/b${majmin}`]: 'E:ID_FS_USAGE=filesystem\nE:ID_FS_TYPE=xfs\n',
    [`sys/dev/block/${majmin}`]: { link: `../../${sys}` },
    'sys/dev/block/259:0': { link: `../../${NV0}` },
    [`sys/${NV0}/dev`]: '259:0\n',
    ...extra,
  };
}

describe('block layers between the file system and the drive', () => {
  const DM = 'devices/virtual/block/dm-0';
  const dm = (uuid: string, name: string) =>
    volume('dm-0', '253:0', DM, { [`sys/${DM}/dm/uuid`]: uuid, [`sys/${DM}/dm/name`]: name, [`sys/${DM}/slaves/nvme0n1`]: { link: `../../../../${NV0.replace('devices/', '')}` } });

  test('LVM over NVMe: the volume, its name and the NVMe drive under it are named', async () => {
    const { p } = await one('lvm', dm('LVM-abcdef', 'vg-data'));
    assert.equal(p.prediction.route, 'cufile-compat');
    assert.deepEqual(codes(p), ['DEVICE_MAPPER']);
    assert.match(p.prediction.blockers[0]!.message, /^dm-0 \(vg-data\) is an LVM logical volume over nvme0n1: cuFile logs "Unsupported block device: \/dev\/dm-0"/);
    assert.match(fixOf(p, 'path.block_device'), /plain NVMe partition or an md RAID0/);
  });

  test('dm-crypt and dm-multipath are told apart', async () => {
    assert.match((await one('crypt', dm('CRYPT-LUKS2-1234', 'secure'))).p.prediction.blockers[0]!.message, /is a dm-crypt volume/);
    assert.match((await one('mpath', dm('mpath-3600a', 'mpatha'))).p.prediction.blockers[0]!.message, /is a dm-multipath device/);
  });

  const MD = 'devices/virtual/block/md0';
  const md = (level: string, udev: string) =>
    volume('md0', '9:0', MD, { [`sys/${MD}/md/level`]: `${level}\n`, [`sys/${MD}/slaves/nvme0n1`]: { link: `../../../../${NV0.replace('devices/', '')}` }, 'run/udev/data/b9:0': udev });

  test('md RAID1 over NVMe: only RAID0 goes direct', async () => {
    const { p } = await one('raid1', md('raid1', 'E:ID_FS_USAGE=filesystem\nE:ID_FS_TYPE=xfs\nE:MD_LEVEL=raid1\n'));
    assert.deepEqual(codes(p), ['MD_RAID_LEVEL']);
    assert.match(fixOf(p, 'path.block_device'), /md0 is raid1: .*RAID0 only/);
  });

  test('md RAID0 without the udev rule (no MD_LEVEL in its udev data)', async () => {
    const { p } = await one('raid0-norule', md('raid0', 'E:ID_FS_USAGE=filesystem\nE:ID_FS_TYPE=xfs\n'));
    assert.deepEqual(codes(p), ['MD_NO_UDEV_RULE']);
    assert.match(fixOf(p, 'path.udev'), /has no MD_LEVEL: add the udev rule for md arrays/);
    const ok = await one('raid0-rule', md('raid0', 'E:ID_FS_USAGE=filesystem\nE:ID_FS_TYPE=xfs\nE:MD_LEVEL=raid0\n'));
    assert.equal(ok.p.prediction.route, 'gds');
  });
});

describe('NVMe drives and drivers', () => {
  test('a namespace formatted with protection information', async () => {
    const { p } = await one('nvme-pi', { [`${NVME_DISK}/integrity/format`]: 'T10-DIF-TYPE1-CRC\n' }, { from: GDS });
    assert.deepEqual(codes(p), ['NVME_PROTECTION_INFO']);
    assert.match(fixOf(p, 'path.block_device'), /nvme0n1 is formatted with protection information \(T10-DIF-TYPE1-CRC\)/);
    const none = await one('nvme-nopi', { [`${NVME_DISK}/integrity/format`]: 'none\n' }, { from: GDS });
    assert.equal(none.p.prediction.route, 'gds');
  });

  test('nvidia-fs loaded, but the NVMe driver not registered with it', async () => {
    const facts = { ...GDS_FACTS, cufile: { ...GDS_FACTS.cufile, props: { ...GDS_FACTS.cufile.props!, dstatusflags: 1 << 2 } } };
    const { p } = await one('nvme-unregistered', {}, { from: GDS, facts });
    assert.deepEqual(codes(p), ['NVME_NOT_SUPPORTED']);
    assert.match(p.verdict, /"NVMe Driver not registered with nvidia-fs"/);
  });
});

describe('PCI P2PDMA instead of nvidia-fs', () => {
  const p2p = (module: string) => ({
    'proc/driver/nvidia/version': `NVRM version: ${module}  570.86.15  Release Build  (dvs-builder@U16)  Thu Jan 30 2025\nGCC version:  gcc version 12.3.0\n`,
    'etc/cufile.json': '{ "properties": { "use_pci_p2pdma": true } }',
    'proc/driver/nvidia-fs': null,
    'dev/nvidia-fs0': null,
    'sys/module/nvidia_fs': null,
  });
  // No nvidia-fs, and the open driver lists the NVME_P2P back end.
  const facts = { ...GDS_FACTS, cufile: { ...GDS_FACTS.cufile, props: { ...GDS_FACTS.cufile.props!, nvfsMajor: 0, nvfsMinor: 0, dstatusflags: 1 << 11 } } };

  test('everything in place: direct without nvidia-fs', async () => {
    const { p, platform } = await one('p2p-ready', p2p('NVIDIA UNIX Open Kernel Module for x86_64'), { from: GDS, facts });
    assert.equal(p.prediction.route, 'gds');
    assert.equal(platform.find((c) => c.id === 'platform.p2pdma.readiness')!.status, 'pass');
    assert.equal(platform.find((c) => c.id === 'platform.nvidia.kernel_module')!.data?.kernelModule && (platform.find((c) => c.id === 'platform.nvidia.kernel_module')!.data!.kernelModule as { open: boolean }).open, true);
  });

  test('the proprietary kernel module: not ready, and nvidia-fs is needed after all', async () => {
    const { p, platform } = await one('p2p-proprietary', p2p('NVIDIA UNIX x86_64 Kernel Module'), { from: GDS, facts });
    assert.deepEqual(codes(p), ['NO_NVIDIA_FS']);
    assert.match(platform.find((c) => c.id === 'platform.p2pdma.readiness')!.summary, /missing the open NVIDIA kernel module/);
  });
});

describe('file systems', () => {
  const fsTree = (type: string, device = 'none') => ({ ...BASE, 'proc/mounts': `${device} /data ${type} rw,relatime 0 0\n`, 'data/model.bin': 'x' });

  test('btrfs, fuse and cifs are compat only by nature', async () => {
    for (const type of ['btrfs', 'fuse.sshfs', 'cifs', 'squashfs', 'zfs']) {
      const { p } = await one(`fs-${type}`, fsTree(type));
      assert.equal(p.prediction.route, 'cufile-compat', type);
      assert.deepEqual(codes(p).filter((c) => c !== 'NO_BLOCK_DEVICE'), ['FS_COMPAT_ONLY'], type);
    }
  });

  test('vfat: no mode at all, penstock stages it', async () => {
    const { p } = await one('fs-vfat', fsTree('vfat'));
    assert.equal(p.prediction.route, 'posix-device');
    assert.deepEqual(codes(p), ['FS_REFUSED']);
  });

  test('WekaFS: nvidia_peermem, then the RDMA addresses', async () => {
    const facts = { ...FACTS, cufile: { ...FACTS.cufile, props: { ...FACTS.cufile.props!, dstatusflags: 1 << 1 } } };
    const noPeer = await one('weka', fsTree('wekafs', 'weka0'), { facts });
    assert.deepEqual(codes(noPeer.p), ['NO_NVIDIA_PEERMEM']);
    assert.match(noPeer.p.verdict, /modprobe nvidia_peermem/);
    const noAddr = await one('weka-peer', { ...fsTree('wekafs', 'weka0'), 'sys/module/nvidia_peermem/version': '1.0\n' }, { facts });
    assert.deepEqual(codes(noAddr.p), ['NO_RDMA_ADDRESSES']);
    const ready = await one('weka-ready', { ...fsTree('wekafs', 'weka0'), 'sys/module/nvidia_peermem/version': '1.0\n', 'etc/cufile.json': '{"properties":{"rdma_dev_addr_list":["10.0.0.5"]}}' }, { facts });
    assert.equal(ready.p.prediction.route, 'gds');
  });
});

describe('files, GPUs and the driver', () => {
  test('an immutable, encrypted file', async () => {
    const { p } = await one('flags', { 'stat.json': JSON.stringify({ '/data/model.bin': { dev: '259:1', lsattr: '----i-------E-e-------' } }) }, { from: GDS });
    assert.deepEqual(codes(p), ['FILE_FLAGS']);
    assert.equal(p.checks.find((c) => c.id === 'path.flags')!.summary, 'immutable, encrypted');
    assert.match(fixOf(p, 'path.flags'), /chattr -iE/);
  });

  test('WSL: compat only', async () => {
    const { p, platform } = await one('wsl', { 'proc/version': 'Linux version 5.15.167.4-microsoft-standard-WSL2 (root@1) #1 SMP\n' }, { from: GDS });
    assert.ok(codes(p).includes('WSL'));
    assert.equal(platform.find((c) => c.id === 'platform.gpu.virtual')!.status, 'fail');
  });

  test('a vGPU profile is a warning that only a probe settles', async () => {
    const facts = { ...GDS_FACTS, gpus: [{ ...GDS_FACTS.gpus[0]!, name: 'GRID A100-40C' }] };
    const { platform } = await one('vgpu', {}, { from: GDS, facts });
    const c = platform.find((x) => x.id === 'platform.gpu.virtual')!;
    assert.equal(c.status, 'warn');
    assert.match(c.fix!, /measure with --probe/);
  });

  test('kernel module and libcuda from different driver releases', async () => {
    const facts = { ...GDS_FACTS, cuda: { ...GDS_FACTS.cuda, resolvedPath: '/usr/lib/x86_64-linux-gnu/libcuda.so.560.35.03' } };
    const { platform } = await one('mismatch', { 'proc/driver/nvidia/version': 'NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.86.15  Release Build\n' }, { from: GDS, facts });
    const c = platform.find((x) => x.id === 'platform.nvidia.kernel_module')!;
    assert.equal(c.status, 'fail');
    assert.match(c.summary, /570\.86\.15; libcuda 560\.35\.03 \(different/);
  });

  test('libcufile without liburcu', async () => {
    const facts = { ...GDS_FACTS, cufile: { loaded: false, path: 'libcufile.so.0', driverOpen: false, statsLevel: 0, error: 'liburcu-bp.so.6: cannot open shared object file: No such file or directory' } };
    const { p } = await one('urcu', {}, { from: GDS, facts });
    assert.deepEqual(codes(p), ['CUFILE_NOT_LOADED']);
    assert.match(p.verdict, /install liburcu/);
  });
});

describe('cufile.json settings', () => {
  test('a deny-listed mount: cuFile refuses the file', async () => {
    const { p } = await one('deny', { 'etc/cufile.json': '{ "denylist": { "mounts": ["/data"], "filesystems": [] } }' }, { from: GDS });
    assert.equal(p.prediction.route, 'posix-device');
    assert.deepEqual(codes(p), ['CUFILE_DENYLISTED']);
    assert.match(p.verdict, /remove mount \/data from the deny list in \/etc\/cufile\.json/);
  });

  test('more pinned memory allowed than BAR1 holds', async () => {
    const { platform } = await one('pinned', { 'etc/cufile.json': '{ "properties": { "max_device_pinned_mem_size_kb": 268435456 } }' }, { from: GDS });
    const c = platform.find((x) => x.id === 'platform.cufile.settings')!;
    assert.equal(c.status, 'warn');
    assert.match(c.summary, /exceeds BAR1 of GPU 0 \(128 GiB\)/);
  });
});

describe('one read, by its offset and size', () => {
  const sized = { 'stat.json': JSON.stringify({ '/data/model.bin': { dev: '259:1', size: 64 << 20 } }) };
  const shape = async (offset: number, size?: number, extra: Record<string, TreeEntry> = {}) =>
    (await one(`shape-${offset}-${size}-${Object.keys(extra).length}`, { ...sized, ...extra }, { from: GDS, shape: { offset, ...(size !== undefined ? { size } : {}) } })).p;

  test('aligned: direct', async () => {
    const p = await shape(1 << 20, 8 << 20);
    assert.equal(p.shape?.route, 'gds');
    assert.equal(p.checks.find((c) => c.id === 'path.shape')!.status, 'pass');
  });

  test('an unaligned offset goes through cuFile\'s bounce cache', async () => {
    const p = await shape(4097, 8 << 20);
    assert.equal(p.shape?.route, 'gds-bounce');
    assert.deepEqual(p.shape?.reasons.map((r) => r.code), ['UNALIGNED_IO']);
    assert.match(p.shape!.reasons[0]!.message, /^offset 4097 not a multiple of 4 KiB/);
  });

  test('an unaligned place in the GPU buffer goes through the bounce cache too', async () => {
    const p = (await one('shape-target', sized, { from: GDS, shape: { offset: 0, size: 1 << 20, targetOffset: 512 } })).p;
    assert.equal(p.shape?.route, 'gds-bounce');
    assert.match(p.shape!.reasons[0]!.message, /^target offset 512 not a multiple of 4 KiB/);
  });

  test('an unaligned tail at the end of the file is still direct', async () => {
    assert.equal((await shape(0)).shape?.size, 64 << 20);
    const odd = await shape(0, undefined, { 'stat.json': JSON.stringify({ '/data/model.bin': { dev: '259:1', size: (64 << 20) + 100 } }) });
    assert.equal(odd.shape?.size, (64 << 20) + 100);
    assert.equal(odd.shape?.route, 'gds');
  });

  test('under gdsThreshold: penstock stages it without cuFile', async () => {
    const p = await shape(0, 4096);
    assert.equal(p.shape?.route, 'posix-device');
    assert.deepEqual(p.shape?.reasons.map((r) => r.code), ['UNDER_GDS_THRESHOLD']);
  });

  test('past the end of the file: clipped, and said so', async () => {
    const p = await shape((64 << 20) - (1 << 20), 8 << 20);
    assert.equal(p.shape?.size, 1 << 20);
    assert.deepEqual(p.shape?.notes.map((n) => n.code), ['SHAPE_PAST_END']);
  });

  test('a bad shape is a typed usage error', async () => {
    await assert.rejects(diagnose(['/'], { root: GDS, facts: GDS_FACTS, env: {}, shape: { offset: -1 } }), { code: 'ERR_PENSTOCK_INVALID_ARGUMENT' });
    await assert.rejects(diagnose(['/'], { root: GDS, facts: GDS_FACTS, env: {}, shape: { offset: 0, size: 1.5 } }), { code: 'ERR_PENSTOCK_INVALID_ARGUMENT' });
  });

  test('a file that does not go direct: the read follows the file', async () => {
    const p = await shape(0, 1 << 20, { 'etc/cufile.json': '{ "properties": { "force_compat_mode": true } }' });
    assert.equal(p.shape?.route, 'posix-device');
    assert.deepEqual(p.shape?.reasons.map((r) => r.code), ['CUFILE_COMPAT_FORCED']);
  });
});
