/**
 * `diagnose()` against recorded machines (test/fixtures/doctor/<name>): each tree stands in for
 * /proc, /sys, /run, /etc and /dev, and the CUDA and cuFile facts are stated, so every verdict
 * and reason here is what the doctor concludes from those files alone.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { describe, test } from 'node:test';
import { repoRoot } from '../helpers.js';
import { diagnose, render, type Check, type DoctorReport, type PathReport, type PlatformFacts } from '../../src/doctor/index.js';
import type { CuFileDriverProps } from '../../src/addon/binding.js';

const FIXTURES = path.join(repoRoot, 'test/fixtures/doctor');

const NVME = 1 << 4;
const NVMEOF = 1 << 5;
const NFS = 1 << 2;

function props(nvfs: boolean, dstatusflags: number, compat = true): CuFileDriverProps {
  return {
    nvfsMajor: nvfs ? 2 : 0, nvfsMinor: nvfs ? 17 : 0, pollThresholdKiB: 4, maxDirectIoKiB: 16384, dstatusflags,
    dcontrolflags: compat ? 2 : 0, fflags: 0, maxDeviceCacheKiB: 131072, perBufferCacheKiB: 1024,
    maxDevicePinnedKiB: 33554432, maxBatchIo: 128, maxBatchIoTimeoutMs: 5,
  };
}

/** A machine with one GPU at `pciBusId`, CUDA 12.8 and cuFile 1.15 with the given driver properties. */
function gpuFacts(pciBusId: string, driverProps: CuFileDriverProps, name = 'NVIDIA H100 80GB HBM3'): PlatformFacts {
  return {
    cuda: { loaded: true, path: 'libcuda.so.1', resolvedPath: '/usr/lib/x86_64-linux-gnu/libcuda.so.570.86.15', initialized: true, driverVersion: 12080, deviceCount: 1 },
    gpus: [{ ordinal: 0, name, totalMemory: 85520809984, pciBusId, computeCapability: [9, 0] }],
    cufile: { loaded: true, path: 'libcufile.so.0', resolvedPath: '/usr/local/cuda/lib64/libcufile.so.1.15.1', version: 1150, driverOpen: true, props: driverProps, statsLevel: 3 },
  };
}

const NO_CUDA: PlatformFacts = {
  cuda: { loaded: false, path: 'libcuda.so.1', initialized: false, error: 'libcuda.so.1: cannot open shared object file: No such file or directory' },
  gpus: [],
  cufile: { loaded: false, path: 'libcufile.so.0', driverOpen: false, statsLevel: 0, error: 'libcufile.so.0: cannot open shared object file: No such file or directory' },
};

const run = (name: string, paths: string[], facts: PlatformFacts, env: NodeJS.ProcessEnv = {}) =>
  diagnose(paths, { root: path.join(FIXTURES, name), facts, env });

function check(checks: Check[], id: string): Check {
  const c = checks.find((x) => x.id === id);
  assert.ok(c, `check ${id} is present (have ${checks.map((x) => x.id).join(', ')})`);
  return c;
}

describe('the CUDA driver check', () => {
  test('names the batch-copy entry point where the driver has one, and says so where it has none', async () => {
    const facts = gpuFacts('00000000:83:00.0', props(true, NVME | NVMEOF));
    const without = check((await run('gds-nvme', [], facts)).platform, 'platform.cuda.driver');
    assert.equal(without.status, 'pass');
    assert.match(without.summary, /, 1 GPU\(s\), no batch copies \(/);
    assert.equal(without.data?.copyBatch, null);
    const withBatch = check((await run('gds-nvme', [], { ...facts, cuda: { ...facts.cuda, copyBatch: 'cuMemcpyBatchAsync' } })).platform, 'platform.cuda.driver');
    assert.match(withBatch.summary, /, 1 GPU\(s\), batch copies \(cuMemcpyBatchAsync\)$/);
    assert.equal(withBatch.data?.copyBatch, 'cuMemcpyBatchAsync');
  });
});

const codes = (p: PathReport) => p.prediction.blockers.map((b) => b.code);
const warningCodes = (p: PathReport) => p.prediction.warnings.map((w) => w.code);

describe('a GDS-ready NVMe host', () => {
  const facts = gpuFacts('00000000:83:00.0', props(true, NVME | NVMEOF));
  let report: DoctorReport;

  test('predicts the direct path, with nothing in the way', async () => {
    report = await run('gds-nvme', ['/data/model.bin'], facts);
    const p = report.paths[0]!;
    assert.equal(p.prediction.route, 'gds');
    assert.deepEqual(p.prediction.blockers, []);
    assert.deepEqual(p.prediction.warnings, []);
    assert.match(p.verdict, /^gds \(GPUDirect Storage/);
    assert.equal(report.allDirect, true);
    assert.equal(report.schema, 1);
  });

  test('reads the platform from the tree: nvidia-fs, cufile.json with comments, BAR1, P2PDMA', () => {
    const nvfs = check(report.platform, 'platform.nvidia_fs');
    assert.equal(nvfs.status, 'pass');
    assert.equal(nvfs.data?.version, '2.17');
    assert.equal(nvfs.data?.devices, 1);
    const cfg = check(report.platform, 'platform.cufile.config');
    assert.equal(cfg.data?.found, true);
    assert.equal(cfg.data?.error, undefined);
    assert.equal(cfg.data?.['logging.dir'], '//var/log/cufile', 'a // inside a string is not a comment');
    assert.equal(cfg.data?.['logging.level'], 'ERROR');
    assert.equal(cfg.data?.['profile.cufile_stats'], 3);
    assert.equal(cfg.data?.allow_compat_mode, true);
    assert.equal(cfg.data?.use_pci_p2pdma, false);
    const bar1 = check(report.platform, 'platform.gpu.bar1');
    assert.equal(bar1.status, 'pass');
    assert.deepEqual(bar1.data?.gpus, [{ ordinal: 0, bar1Bytes: 128 * 2 ** 30 }]);
    assert.equal(check(report.platform, 'platform.pci_p2pdma').data?.state, 'available');
    const driver = check(report.platform, 'platform.cufile.driver');
    assert.deepEqual(driver.data?.backends, ['NVME', 'NVMEOF']);
    assert.equal(driver.data?.compatAllowed, true);
    assert.equal(check(report.platform, 'platform.iommu').data?.state, 'off');
    assert.deepEqual(check(report.platform, 'platform.container').data?.hints, []);
    assert.deepEqual(check(report.platform, 'platform.vm').data?.hints, []);
    assert.equal(check(report.platform, 'platform.kernel').data?.release, '6.8.0-45-generic');
  });

  test('finds the partition, udev data, the shared switch and ACS off', () => {
    const c = report.paths[0]!.checks;
    const block = check(c, 'path.block_device');
    assert.equal(block.data?.name, 'nvme0n1p1');
    assert.equal(block.data?.disk, 'nvme0n1');
    assert.equal(block.data?.kind, 'nvme');
    assert.equal(check(c, 'path.udev').status, 'pass');
    assert.equal(check(c, 'path.fs.data_ordered').status, 'pass');
    const pcie = check(c, 'path.pcie');
    assert.equal(pcie.data?.relation, 'PIX');
    assert.deepEqual(pcie.data?.bridges, ['0000:81:00.0', '0000:82:00.0', '0000:82:01.0']);
    const acs = check(c, 'path.acs');
    assert.equal(acs.status, 'pass');
    assert.deepEqual(
      (acs.data?.bridges as { bridge: string; state: string }[]).map((b) => `${b.bridge}=${b.state}`),
      ['0000:81:00.0=no-capability', '0000:82:00.0=off', '0000:82:01.0=off'],
    );
    assert.equal(check(c, 'path.o_direct').data?.state, 'untested', 'no real open against a recorded root');
    assert.equal(check(c, 'path.route').status, 'pass');
  });

  test('forcing compat mode through the environment keeps penstock from opening cuFile: staged, with that reason', async () => {
    const r = await run('gds-nvme', ['/data/model.bin'], facts, { CUFILE_FORCE_COMPAT_MODE: 'true', PENSTOCK_THREADS: '8' });
    const p = r.paths[0]!;
    assert.equal(p.prediction.route, 'posix-device');
    assert.deepEqual(codes(p), ['CUFILE_COMPAT_FORCED']);
    assert.equal(check(r.platform, 'platform.cufile.open').data?.code, 'CUFILE_COMPAT_FORCED');
    assert.match(p.verdict, /remove CUFILE_FORCE_COMPAT_MODE/);
    assert.equal(check(r.platform, 'platform.compat').status, 'fail');
    assert.deepEqual(check(r.platform, 'platform.env').data, { CUFILE_FORCE_COMPAT_MODE: 'true', PENSTOCK_THREADS: '8' });
    assert.equal(r.allDirect, false);
  });

  test('PENSTOCK_COMPAT_MODE=on keeps penstock away from cuFile', async () => {
    const r = await run('gds-nvme', ['/data/model.bin'], facts, { PENSTOCK_COMPAT_MODE: 'on' });
    assert.equal(r.paths[0]!.prediction.route, 'posix-device');
    assert.deepEqual(codes(r.paths[0]!), ['COMPAT_MODE_ON']);
  });

  test('compat not allowed: what cannot go direct is refused by cuFile and staged by penstock', async () => {
    const r = await run('gds-nvme', ['/data/model.bin'], gpuFacts('00000000:83:00.0', props(true, NVME, false), 'NVIDIA GeForce RTX 4090'));
    assert.equal(r.paths[0]!.prediction.route, 'posix-device');
    assert.deepEqual(codes(r.paths[0]!), ['GEFORCE_GPU', 'COMPAT_NOT_ALLOWED']);
    // Forced compat keeps penstock from opening cuFile at all: that is then the one reason.
    const forced = await run('gds-nvme', ['/data/model.bin'], gpuFacts('00000000:83:00.0', props(true, NVME, false)), { CUFILE_FORCE_COMPAT_MODE: '1' });
    assert.equal(forced.paths[0]!.prediction.route, 'posix-device');
    assert.deepEqual(codes(forced.paths[0]!), ['CUFILE_COMPAT_FORCED']);
  });

  test('a GeForce GPU gets no direct path', async () => {
    const r = await run('gds-nvme', ['/data/model.bin'], gpuFacts('0000:83:00.0', props(true, NVME), 'NVIDIA GeForce RTX 4090'));
    assert.equal(r.paths[0]!.prediction.route, 'cufile-compat');
    assert.deepEqual(codes(r.paths[0]!), ['GEFORCE_GPU']);
    assert.equal(check(r.platform, 'platform.gpus').status, 'warn');
  });

  test('the text report groups checks with marks and ends each path with its verdict', () => {
    const text = render(report, { colour: false });
    assert.match(text, /^penstock doctor \(recorded root .*gds-nvme\)$/m);
    assert.match(text, /^Platform$/m);
    assert.match(text, /^ {2}✓ nvidia-fs +loaded, version 2\.17/m);
    assert.match(text, /^\/data\/model\.bin$/m);
    assert.match(text, /^ {2}✓ PCIe +GPU 0 ↔ drive: PIX$/m);
    assert.match(text, /^ {2}Verdict: gds /m);
    assert.doesNotMatch(text, /\x1b\[/, 'no colour unless asked');
    assert.match(render(report, { colour: true }), /\x1b\[32m✓\x1b\[0m/);
  });
});

describe('a GPU VM with a virtio disk, no nvidia-fs and no udev', () => {
  test('predicts the staged path, and says every reason', async () => {
    const r = await run('gpu-vm', ['/root/model.bin'], gpuFacts('00000000:00:06.0', props(false, 0)));
    const p = r.paths[0]!;
    assert.equal(p.prediction.route, 'posix-device');
    assert.deepEqual(codes(p), ['NO_UDEV', 'NO_NVIDIA_FS', 'EXT4_NOT_DATA_ORDERED', 'VIRTIO_DISK', 'CUFILE_NO_DIRECT_PATH']);
    const msg = p.prediction.blockers.map((b) => b.message).join('\n');
    assert.match(msg, /run udev \(systemd-udevd\) or mount \/run\/udev/);
    assert.match(msg, /5027/);
    assert.match(msg, /load the nvidia-fs kernel module/);
    assert.match(msg, /remount ext4 with data=ordered/);
    assert.match(msg, /this disk is virtio, not NVMe \(vda\): no direct path in this VM/);
    assert.match(p.verdict, /^posix-device .*\(\+4 more\)$/);
    assert.deepEqual(warningCodes(p), [], 'no PCIe advice for a disk that cannot go direct anyway');
    assert.equal(check(p.checks, 'path.pcie').summary, 'not applicable (no local NVMe drive)');
    assert.equal(check(p.checks, 'path.block_device').data?.kind, 'virtio');
    assert.equal(check(p.checks, 'path.udev').status, 'fail');
    assert.equal(check(p.checks, 'path.fs.data_ordered').status, 'fail');
  });

  test('recognises the VM, reports no udev database and BAR1 of the H200', async () => {
    const r = await run('gpu-vm', ['/root/model.bin'], gpuFacts('0000:00:06.0', props(false, 0)));
    const vm = check(r.platform, 'platform.vm').data?.hints as string[];
    assert.deepEqual(vm, ["CPU flag 'hypervisor'", 'kernel command line names Firecracker', 'virtio disks: vda']);
    assert.equal(check(r.platform, 'platform.udev').status, 'fail');
    assert.deepEqual(check(r.platform, 'platform.container').data, { hints: [], udev: false });
    assert.equal(check(r.platform, 'platform.nvidia_fs').status, 'fail');
    assert.equal(check(r.platform, 'platform.cufile.driver').data?.nvfsVersion, undefined);
    assert.equal(check(r.platform, 'platform.cufile.config').data?.['profile.cufile_stats'], 0);
    assert.equal((check(r.platform, 'platform.gpu.bar1').data?.gpus as { bar1Bytes: number }[])[0]!.bar1Bytes, 256 * 2 ** 30);
    assert.equal(check(r.platform, 'platform.pci_p2pdma').data?.state, 'unknown');
  });
});

describe('a container without /run/udev', () => {
  test('the NVMe volume is refused by cuFile until /run/udev is mounted in', async () => {
    const r = await run('container-no-udev', ['/data/model.bin', '/'], gpuFacts('00000000:83:00.0', props(true, NVME)));
    const [data, rootfs] = r.paths;
    assert.equal(data!.prediction.route, 'posix-device');
    assert.deepEqual(codes(data!), ['NO_UDEV']);
    assert.match(data!.verdict, /mount \/run\/udev into the container/);
    // No stat.json here: the device comes from the mount's /dev node via /sys/class/block.
    assert.equal(check(data!.checks, 'path.block_device').data?.majmin, '259:1');
    assert.equal(check(data!.checks, 'path.exists').data?.type, 'file');
    assert.equal(rootfs!.prediction.route, 'posix-device');
    assert.deepEqual(codes(rootfs!), ['NO_UDEV', 'FS_COMPAT_ONLY']);
    assert.match(rootfs!.prediction.blockers[1]!.message, /^overlay is read by cuFile only in compat mode/);
    const hints = check(r.platform, 'platform.container').data?.hints as string[];
    assert.deepEqual(hints, ['/.dockerenv (Docker)', "PID 1's cgroup names docker"]);
    assert.equal(check(r.platform, 'platform.udev').fix, 'mount /run/udev into the container (read-only is enough)');
  });
});

describe('file systems', () => {
  const facts = gpuFacts('00000000:83:00.0', props(true, NVME | NFS));

  test('ext4 without data=ordered: cuFile stages it (compat)', async () => {
    const r = await run('ext4-no-ordered', ['/model.bin'], facts);
    const p = r.paths[0]!;
    assert.equal(p.prediction.route, 'cufile-compat');
    assert.deepEqual(codes(p), ['EXT4_NOT_DATA_ORDERED']);
    assert.match(p.verdict, /^cufile-compat .*remount ext4 with data=ordered/);
    assert.equal(check(p.checks, 'path.fs.data_ordered').status, 'fail');
    assert.match(check(p.checks, 'path.fs.data_ordered').fix!, /data=ordered/);
  });

  test('tmpfs: only compat mode', async () => {
    const r = await run('tmpfs', ['/dev/shm/model.bin'], facts);
    const p = r.paths[0]!;
    assert.equal(p.prediction.route, 'cufile-compat');
    assert.deepEqual(codes(p), ['FS_COMPAT_ONLY']);
    assert.match(p.prediction.blockers[0]!.message, /^tmpfs is read by cuFile only in compat mode/);
    assert.equal(check(p.checks, 'path.mount').data?.mountPoint, '/dev/shm');
    assert.equal(check(p.checks, 'path.block_device').status, 'info');
    assert.equal(check(p.checks, 'path.udev').summary, 'not needed (no block device)');
  });

  test('NFS: over TCP compat only, over RDMA direct', async () => {
    const r = await run('nfs', ['/mnt/tcp/model.bin', '/mnt/rdma/model.bin'], facts);
    const [tcp, rdma] = r.paths;
    assert.equal(tcp!.prediction.route, 'cufile-compat');
    assert.deepEqual(codes(tcp!), ['NFS_WITHOUT_RDMA']);
    assert.match(tcp!.prediction.blockers[0]!.message, /^NFS needs RDMA for the direct path: mount \/mnt\/tcp with proto=rdma/);
    assert.equal(rdma!.prediction.route, 'gds');
    assert.equal(r.allDirect, false);
    const noNfs = await run('nfs', ['/mnt/rdma/model.bin'], gpuFacts('0000:83:00.0', props(true, NVME)));
    assert.deepEqual(codes(noNfs.paths[0]!), ['NFS_NOT_SUPPORTED']);
  });

  test('XFS on an NVMe drive on the other socket: direct, with a warning', async () => {
    const r = await run('xfs-cross-socket', ['/scratch/shard-0001.bin'], gpuFacts('00000000:C1:00.0', props(true, NVME)));
    const p = r.paths[0]!;
    assert.equal(p.prediction.route, 'gds');
    assert.deepEqual(codes(p), []);
    assert.deepEqual(warningCodes(p), ['PCIE_CROSS_SOCKET']);
    assert.match(p.prediction.warnings[0]!.message, /GPU 0 and nvme1n1 are on different CPU sockets \(SYS\)/);
    const pcie = check(p.checks, 'path.pcie');
    assert.equal(pcie.status, 'warn');
    assert.equal(pcie.data?.relation, 'SYS');
    const acs = check(p.checks, 'path.acs');
    assert.equal(acs.status, 'info');
    assert.match(acs.summary, /not readable beyond 64 bytes \(run as root to see ACS\)/);
    const block = check(p.checks, 'path.block_device').data;
    assert.equal(block?.name, 'nvme1n1');
    assert.equal(block?.disk, undefined, 'a whole namespace, not a partition of its controller');
    assert.equal(check(p.checks, 'path.fs.supported').status, 'pass');
    assert.equal(report(r).includes('path.fs.data_ordered'), false, 'the ext4 check appears for ext4 only');
  });
});

function report(r: DoctorReport): string[] {
  return r.paths.flatMap((p) => p.checks.map((c) => c.id));
}

describe('a machine without CUDA', () => {
  test('host reads only, and the remaining obstacles are still listed', async () => {
    const r = await run('no-cuda', ['/srv/model.bin'], NO_CUDA);
    const p = r.paths[0]!;
    assert.equal(p.prediction.route, 'posix-host');
    assert.deepEqual(codes(p), ['NO_CUDA', 'NO_NVIDIA_FS', 'CUFILE_NO_DIRECT_PATH']);
    assert.match(p.verdict, /^posix-host \(no usable GPU: host reads only\): install the NVIDIA driver/);
    assert.equal(check(r.platform, 'platform.cuda.driver').status, 'fail');
    assert.match(check(r.platform, 'platform.cuda.driver').summary, /cannot open shared object file/);
    assert.equal(check(r.platform, 'platform.cufile.driver').status, 'info');
    assert.equal(r.platform.some((c) => c.id === 'platform.gpu.bar1'), false);
    assert.equal(check(p.checks, 'path.pcie').summary, 'no GPU to relate the drive to');
    assert.equal(check(p.checks, 'path.block_device').status, 'pass');
  });

  test('a path that does not exist is examined through its nearest directory', async () => {
    const r = await run('no-cuda', ['/srv/new/weights.bin'], NO_CUDA);
    const c = check(r.paths[0]!.checks, 'path.exists');
    assert.equal(c.status, 'warn');
    assert.equal(c.data?.examined, '/');
    assert.equal(check(r.paths[0]!.checks, 'path.mount').data?.mountPoint, '/');
  });

  test('--probe against a recorded root measures nothing', async () => {
    const r = await diagnose(['/srv/model.bin'], { root: path.join(FIXTURES, 'no-cuda'), facts: NO_CUDA, env: {}, probe: true });
    assert.equal(r.paths[0]!.probe?.status, 'skipped');
    assert.equal(check(r.paths[0]!.checks, 'path.probe').status, 'info');
  });
});
