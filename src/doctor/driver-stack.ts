/**
 * The layers under cuFile that the first platform checks do not cover: the NVIDIA kernel module
 * (its version against libcuda's, open or proprietary), WSL, virtual and partitioned GPUs,
 * nvidia_peermem for RDMA file systems, PCI P2PDMA readiness in full, and the cufile.json
 * settings that change a file's path (deny lists, POSIX thresholds, RDMA addresses, pinning).
 */
import { formatSize } from '../settings/config.js';
import type { CuFileConfig } from '../system/cufile-json.js';
import type { SysRoot } from '../system/sysfs.js';
import type { Check, GpuState, PlatformFacts } from './types.js';

/** The CUDA driver release P2PDMA needs (CUDA 12.8, driver branch 570), as the sentences say. */
const P2PDMA_MIN_DRIVER = 12080;
const P2PDMA_MIN_BRANCH = 570;

/** The NVIDIA kernel module as /proc/driver/nvidia/version shows it. */
export interface KernelModule {
  version: string;
  open: boolean;
}

/** `/proc/driver/nvidia/version`: the kernel module's version and whether it is the open one. */
export function nvidiaKernelModule(root: SysRoot): KernelModule | undefined {
  const text = root.text('/proc/driver/nvidia/version');
  const line = text?.split('\n').find((l) => l.startsWith('NVRM version:'));
  const version = line && /\s(\d+\.\d+(?:\.\d+)?)\s/.exec(line + ' ')?.[1];
  return version ? { version, open: /open kernel module/i.test(line) } : undefined;
}

/** libcuda's version from its resolved file name (libcuda.so.570.86.15). */
export function libcudaVersion(resolved: string | undefined): string | undefined {
  return resolved ? /libcuda\.so\.(\d+\.\d+(?:\.\d+)?)$/.exec(resolved)?.[1] : undefined;
}

/** Why this looks like WSL, or undefined. */
export function isWsl(root: SysRoot, env: NodeJS.ProcessEnv): string | undefined {
  if (/microsoft|WSL/i.test(root.text('/proc/version') ?? '')) return '/proc/version names Microsoft (WSL)';
  if (root.exists('/dev/dxg')) return '/dev/dxg present (WSL GPU paravirtualisation)';
  if (env.WSL_DISTRO_NAME) return `WSL_DISTRO_NAME=${env.WSL_DISTRO_NAME}`;
  return undefined;
}

/** vGPU profile names (GRID A100-40C, NVIDIA A100-4C) and MIG selections. */
export function virtualGpu(g: { name: string }, env: NodeJS.ProcessEnv): string | undefined {
  if (/\bGRID\b/i.test(g.name) || /-\d+[ABCQ]$/.test(g.name)) return `${g.name} is a vGPU profile`;
  if (/^MIG-/i.test(env.CUDA_VISIBLE_DEVICES ?? '') || /\bMIG\b/.test(g.name)) return 'a MIG instance is selected (CUDA_VISIBLE_DEVICES=MIG-…)';
  return undefined;
}

/** What the PCI P2PDMA path needs, item by item, and whether all of it is in place. */
export interface P2pdmaReadiness {
  kernel: 'available' | 'absent' | 'unknown';
  openDriver: boolean | undefined;
  driverBranchOk: boolean | undefined;
  cudaOk: boolean;
  cufileJson: boolean;
  /** The open driver reports the NVME_P2P back end (unknown when it was not opened). */
  backend: boolean | undefined;
  /** Native NVMe multipath (nvme_core multipath=Y), which P2PDMA readiness does not cover. */
  nvmeMultipath: boolean;
  ready: boolean;
  missing: string[];
}

/** Judges P2PDMA readiness from the kernel config, the kernel module, CUDA, cufile.json and the driver's back ends. */
export function p2pdmaReadiness(root: SysRoot, kernel: P2pdmaReadiness['kernel'], km: KernelModule | undefined, driverVersion: number | undefined, cfg: CuFileConfig, backends: string[] | undefined): P2pdmaReadiness {
  const branch = km ? Number(km.version.split('.')[0]) : undefined;
  const r = {
    kernel,
    openDriver: km?.open,
    driverBranchOk: branch === undefined ? undefined : branch >= P2PDMA_MIN_BRANCH,
    cudaOk: (driverVersion ?? 0) >= P2PDMA_MIN_DRIVER,
    cufileJson: cfg.usePciP2pdma === true,
    backend: backends ? backends.includes('NVME_P2P') : undefined,
    nvmeMultipath: root.line('/sys/module/nvme_core/parameters/multipath') === 'Y',
  };
  const missing = [
    ...(r.kernel !== 'available' ? [`a kernel with CONFIG_PCI_P2PDMA (${r.kernel})`] : []),
    ...(r.openDriver === false ? ['the open NVIDIA kernel module (the proprietary one is loaded)'] : []),
    ...(r.driverBranchOk === false || !r.cudaOk ? [`driver ${P2PDMA_MIN_BRANCH} or later (CUDA 12.8)`] : []),
    ...(!r.cufileJson ? [cfg.unknown ? `properties.use_pci_p2pdma: true in cufile.json (unknown: ${cfg.unknown})` : 'properties.use_pci_p2pdma: true in cufile.json'] : []),
    ...(r.backend === false ? ['the cuFile driver listing NVME_P2P'] : []),
  ];
  // The kernel, the CUDA version and cufile.json are what must be known; the others count only
  // when seen to be wrong.
  return { ...r, ready: missing.length === 0, missing };
}

/** Checks for the kernel module, WSL, virtual GPUs, nvidia_peermem and P2PDMA readiness. */
export function driverStackChecks(root: SysRoot, facts: PlatformFacts, gpus: GpuState[], env: NodeJS.ProcessEnv, p2p: P2pdmaReadiness) {
  const checks: Check[] = [];
  const km = nvidiaKernelModule(root);
  const lib = libcudaVersion(facts.cuda.resolvedPath);
  const mismatch = (km && lib && km.version !== lib) || facts.cuda.initError?.code === 'CUDA_ERROR_SYSTEM_DRIVER_MISMATCH';
  checks.push({
    id: 'platform.nvidia.kernel_module',
    status: mismatch ? 'fail' : km ? 'pass' : 'info',
    title: 'NVIDIA module',
    summary: km
      ? `${km.open ? 'open' : 'proprietary'} kernel module ${km.version}${lib ? `; libcuda ${lib}${mismatch ? ' (different: CUDA refuses to start)' : ''}` : ''}`
      : 'no /proc/driver/nvidia/version (the kernel module is not loaded, or not visible here)',
    ...(mismatch ? { fix: 'make the kernel module and libcuda the same driver release (reboot after a driver update, or mount the host\'s libcuda into the container)' } : {}),
    data: { kernelModule: km, libcuda: lib, mismatch: Boolean(mismatch) },
  });
  const wsl = isWsl(root, env);
  const virtual = gpus.map((g) => virtualGpu(g, env)).find((x) => x);
  checks.push({
    id: 'platform.gpu.virtual',
    status: wsl ? 'fail' : virtual ? 'warn' : 'pass',
    title: 'GPU virtualisation',
    summary: wsl ? `WSL: ${wsl}` : virtual ?? 'no WSL, vGPU or MIG seen',
    ...(wsl ? { fix: 'cuFile has no direct path under WSL: run on Linux itself for GPUDirect Storage' } : virtual ? { fix: 'GPUDirect Storage under vGPU or MIG depends on the host setup and cannot be seen from here: measure with --probe' } : {}),
    data: { wsl: wsl ?? null, virtual: virtual ?? null },
  });
  const peermem = root.exists('/sys/module/nvidia_peermem') || /^nvidia_peermem\s/m.test(root.text('/proc/modules') ?? '');
  checks.push({
    id: 'platform.nvidia_peermem', status: 'info', title: 'nvidia_peermem',
    summary: peermem ? 'loaded (RDMA file systems can reach GPU memory)' : 'not loaded (needed only by RDMA file systems: NFS over RDMA, Lustre, GPFS, WekaFS, BeeGFS)',
    data: { loaded: peermem },
  });
  checks.push({
    id: 'platform.p2pdma.readiness',
    status: p2p.ready ? 'pass' : 'info',
    title: 'P2PDMA readiness',
    summary: p2p.ready
      ? `ready: kernel, driver and cufile.json all allow the P2PDMA path${p2p.nvmeMultipath ? '; native NVMe multipath is on (not covered by the P2PDMA path: use single-path namespaces)' : ''}`
      : `not ready: missing ${p2p.missing.join('; ')}`,
    data: { ...p2p },
  });
  return { checks, wsl, virtual, peermem, kernelModule: km, mismatch: Boolean(mismatch) };
}

/** The cufile.json settings that change the path, with BAR1 set against what cuFile may pin. */
export function cufileSettingsCheck(cfg: CuFileConfig, gpus: GpuState[]): Check {
  const notes: string[] = [];
  const warn: string[] = [];
  const d = cfg.denylist;
  for (const k of ['drivers', 'devices', 'mounts', 'filesystems'] as const) if (d[k].length) warn.push(`denylist.${k}: ${d[k].join(', ')}`);
  for (const [fsName, kb] of Object.entries(cfg.posixGdsMinKb)) if (kb > 0) notes.push(`fs.${fsName}.posix_gds_min_kb=${kb} (smaller I/O on ${fsName} goes through POSIX)`);
  if (cfg.posixUnalignedWrites) notes.push('fs.generic.posix_unaligned_writes=true (unaligned writes through POSIX)');
  if (cfg.rdmaDevAddrList) notes.push(`rdma_dev_addr_list: ${cfg.rdmaDevAddrList.length ? cfg.rdmaDevAddrList.join(', ') : 'empty'}`);
  if (cfg.maxIoThreads !== undefined || cfg.parallelIo !== undefined) notes.push(`execution: parallel_io=${cfg.parallelIo ?? 'default'}, max_io_threads=${cfg.maxIoThreads ?? 'default'}`);
  const pinned = cfg.maxDevicePinnedKb !== undefined ? cfg.maxDevicePinnedKb * 1024 : undefined;
  const tight = pinned !== undefined ? gpus.filter((g) => g.bar1Bytes !== undefined && g.bar1Bytes < pinned) : [];
  if (tight.length)
    warn.push(`max_device_pinned_mem_size_kb (${formatSize(pinned!)}) exceeds BAR1 of ${tight.map((g) => `GPU ${g.ordinal} (${formatSize(g.bar1Bytes!)})`).join(', ')}: registering that much exhausts BAR1 ("Inc-bar-usage failed" in cufile.log) and cuFile stages the rest`);
  return {
    id: 'platform.cufile.settings',
    status: warn.length ? 'warn' : 'info',
    title: 'cuFile settings',
    summary: [...warn, ...notes].join('; ') || (cfg.found ? 'no deny lists, POSIX thresholds or pinning limits that change the path' : cfg.unknown ? `unknown (${cfg.unknown})` : 'cuFile defaults'),
    ...(warn.length ? { fix: d.mounts.length || d.filesystems.length || d.devices.length || d.drivers.length ? 'remove the entries from the deny lists in cufile.json for files that should go direct' : 'lower max_device_pinned_mem_size_kb to what BAR1 holds, or register smaller buffers' } : {}),
    data: { denylist: d, posixGdsMinKb: cfg.posixGdsMinKb, posixUnalignedWrites: cfg.posixUnalignedWrites, rdmaDevAddrList: cfg.rdmaDevAddrList, maxDevicePinnedKb: cfg.maxDevicePinnedKb, bar1Short: tight.map((g) => g.ordinal) },
  };
}
