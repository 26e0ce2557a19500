/**
 * Machine-wide checks: CUDA, GPUs, cuFile, nvidia-fs, P2PDMA, cuFile's configuration and
 * environment, udev, IOMMU, and whether this is a container or a VM.
 */
import zlib from 'node:zlib';
import { defaults, formatSize, fromEnvironment, type CompatMode } from '../settings/config.js';
import type { Settings } from '../settings/table.js';
import { cudaProblem as describeCudaProblem, cufileUnavailableReason, compatModeOn } from '../vocabulary/reasons.js';
import { cufileSettingsCheck, driverStackChecks, nvidiaKernelModule, p2pdmaReadiness } from './driver-stack.js';
import { envFlag, readCuFileConfig, type CuFileConfig } from '../system/cufile-json.js';
import { ioUringCheck } from './io-uring.js';
import { bar1Bytes, locate, normalizeBdf, pciDevicePath } from './pci.js';
import { SysRoot } from '../system/sysfs.js';
import { cufileDirectPathFacts } from '../system/cufile-outlook.js';
import { planCuFileOpen } from '../plan/cufile-open.js';
import type { Check, GpuState, PlatformFacts, PlatformState } from './types.js';

const BACKENDS: [number, string][] = [
  [0, 'LUSTRE'], [1, 'WEKAFS'], [2, 'NFS'], [3, 'GPFS'], [4, 'NVME'], [5, 'NVMEOF'], [6, 'SCSI'],
  [7, 'SCALEFLUX_CSD'], [8, 'NVMESH'], [9, 'BEEGFS'], [11, 'NVME_P2P'], [12, 'SCATEFS'],
];

/** Back-end names from the driver's dstatusflags. */
export function decodeBackends(dstatusflags: number): string[] {
  return BACKENDS.filter(([bit]) => (dstatusflags >>> bit) & 1).map(([, name]) => name);
}

/** 12080 → "12.8" (the CUDA driver's encoding: 1000·major + 10·minor; cuFile's is the same). */
export function formatVersion(v: number): string {
  return `${Math.floor(v / 1000)}.${Math.floor((v % 1000) / 10)}`;
}

export function kernelRelease(root: SysRoot): string | undefined {
  return /^Linux version (\S+)/.exec(root.text('/proc/version') ?? '')?.[1];
}

function kernelConfig(root: SysRoot, release: string | undefined): string | undefined {
  const gz = root.bytes('/proc/config.gz').data;
  if (gz) {
    try {
      return zlib.gunzipSync(gz).toString('utf8');
    } catch {
      // A truncated or odd config.gz: fall back to the copy in /boot.
    }
  }
  return release ? root.text(`/boot/config-${release}`) : undefined;
}

function cmdlineTokens(root: SysRoot): string[] {
  return (root.line('/proc/cmdline') ?? '').split(/\s+/).filter(Boolean);
}

/** Everything the platform checks found, and the state the path predictions need. */
export function inspectPlatform(root: SysRoot, facts: PlatformFacts, env: NodeJS.ProcessEnv): { checks: Check[]; state: PlatformState } {
  const checks: Check[] = [];
  const add = (c: Check) => checks.push(c);

  const release = kernelRelease(root);
  add({ id: 'platform.kernel', status: 'info', title: 'Kernel', summary: release ? `Linux ${release}` : 'version not readable (/proc/version)', data: { release } });

  // CUDA driver and GPUs
  const { cuda } = facts;
  const cudaProblem = facts.addonError ?? describeCudaProblem(cuda);
  const driverVersion = cuda.driverVersion;
  add({
    id: 'platform.cuda.driver',
    status: cudaProblem ? 'fail' : 'pass',
    title: 'CUDA driver',
    summary: cudaProblem
      ? `not usable: ${cudaProblem}`
      : `${cuda.resolvedPath ?? cuda.path}, CUDA ${formatVersion(driverVersion ?? 0)} (${driverVersion}), ${cuda.deviceCount} GPU(s), ` +
        (cuda.copyBatch ? `batch copies (${cuda.copyBatch})` : 'no batch copies (batched reads into ranges apart on a GPU copy one range per call)'),
    ...(cudaProblem ? { fix: cudaAdvice(facts) } : {}),
    data: { path: cuda.path, resolvedPath: cuda.resolvedPath, loaded: cuda.loaded, initialized: cuda.initialized, driverVersion, deviceCount: cuda.deviceCount ?? 0, copyBatch: cuda.copyBatch ?? null, error: cudaProblem },
  });

  const gpus: GpuState[] = facts.gpus.map((g) => {
    const bdf = normalizeBdf(g.pciBusId);
    const sysPath = bdf ? pciDevicePath(root, bdf) : undefined;
    const loc = sysPath ? locate(root, sysPath) : undefined;
    const bar1 = sysPath ? bar1Bytes(root, sysPath) : undefined;
    return {
      ordinal: g.ordinal, name: g.name, pciBusId: bdf ?? g.pciBusId,
      ...(sysPath ? { sysPath } : {}), ...(bar1 !== undefined ? { bar1Bytes: bar1 } : {}), ...(loc?.numaNode !== undefined ? { numaNode: loc.numaNode } : {}),
    };
  });
  const geforce = gpus.filter((g) => isGeForce(g.name));
  add({
    id: 'platform.gpus',
    status: cudaProblem ? 'fail' : geforce.length ? 'warn' : 'pass',
    title: 'GPUs',
    summary: gpus.length
      ? gpus.map((g) => `GPU ${g.ordinal}: ${g.name}, ${formatSize(facts.gpus.find((x) => x.ordinal === g.ordinal)!.totalMemory)}, PCI ${g.pciBusId}`).join('; ')
      : 'none usable',
    ...(geforce.length ? { fix: 'GeForce GPUs get no direct path from cuFile: use a data-centre or workstation GPU for GPUDirect Storage' } : {}),
    data: { gpus: facts.gpus.map((g, i) => ({ ...g, bar1Bytes: gpus[i]!.bar1Bytes, sysPath: gpus[i]!.sysPath, numaNode: gpus[i]!.numaNode })) },
  });
  if (gpus.length) {
    const known = gpus.filter((g) => g.bar1Bytes !== undefined);
    const small = known.filter((g) => g.bar1Bytes! < 2 ** 30);
    add({
      id: 'platform.gpu.bar1',
      status: known.length === 0 ? 'info' : small.length ? 'warn' : 'pass',
      title: 'GPU BAR1',
      summary: known.length === 0
        ? 'not shown by sysfs (no resource file for the GPU)'
        : gpus.map((g) => `GPU ${g.ordinal}: ${g.bar1Bytes !== undefined ? formatSize(g.bar1Bytes) : 'unknown'}`).join('; '),
      ...(small.length ? { fix: 'a small BAR1 limits how much GPU memory the direct path can target at once; data-centre GPUs expose a large BAR1 (enable resizable BAR where offered)' } : {}),
      data: { gpus: gpus.map((g) => ({ ordinal: g.ordinal, bar1Bytes: g.bar1Bytes })) },
    });
  }

  // cuFile library and driver
  const { cufile } = facts;
  add({
    id: 'platform.cufile.library',
    status: cufile.loaded ? 'pass' : 'fail',
    title: 'cuFile library',
    summary: cufile.loaded
      ? `${cufile.resolvedPath ?? cufile.path}, version ${cufile.version !== undefined ? formatVersion(cufile.version) : 'unknown'}`
      : `not loaded (${cufile.path}): ${cufile.error ?? 'unknown error'}`,
    ...(cufile.loaded ? {} : { fix: "install NVIDIA's GPUDirect Storage package (libcufile), or point PENSTOCK_CUFILE_LIBRARY at libcufile.so.0" }),
    data: { path: cufile.path, resolvedPath: cufile.resolvedPath, loaded: cufile.loaded, version: cufile.version, error: cufile.error },
  });
  const props = cufile.driverOpen ? cufile.props : undefined;
  const backends = props ? decodeBackends(props.dstatusflags) : undefined;
  const propsCompat = props ? ((props.dcontrolflags >>> 1) & 1) === 1 : undefined;
  const propsNvfs = props && (props.nvfsMajor || props.nvfsMinor) ? `${props.nvfsMajor}.${props.nvfsMinor}` : undefined;
  // The plan comes first, as in a file's routing: where penstock would not open cuFile's driver,
  // that is the reason its reads are staged, whatever the driver would have said.
  // On the live system the facts are read where penstock's loads read them (the systemRoot setting).
  const factsRoot = root.base === '/' ? new SysRoot(penstockSetting(env, 'systemRoot') ?? '/') : root;
  const openPlan = planCuFileOpen(penstockSetting(env, 'compatMode') ?? 'auto', cufileDirectPathFacts(env, factsRoot));
  const unavailable = openPlan.open === 'never' && openPlan.reason.code !== 'COMPAT_MODE_ON' ? undefined : cufileUnavailableReason(cufile, cudaProblem);
  const cufileProblem: PlatformState['cufileProblem'] =
    openPlan.open === 'never' && openPlan.reason.code !== 'COMPAT_MODE_ON'
      ? { ...openPlan.reason, check: 'platform.cufile.open' }
      : unavailable
        ? { ...unavailable, check: unavailable.code === 'CUFILE_NOT_LOADED' ? 'platform.cufile.library' : unavailable.code === 'NO_CUDA' ? 'platform.cuda.driver' : 'platform.cufile.driver' }
        : undefined;
  add({
    id: 'platform.cufile.open',
    status: openPlan.open === 'never' ? 'info' : 'pass',
    title: "penstock's cuFile plan",
    summary:
      openPlan.open === 'never'
        ? openPlan.reason.message
        : openPlan.open === 'now'
          ? "cuFile's driver is opened before the first device operation (compatMode 'off': cuFile is required)"
          : "cuFile's driver is opened in the background at the first GPU use; operations that start before it is open are staged (CUFILE_OPENING)",
    data: { open: openPlan.open, ...(openPlan.open === 'never' ? { code: openPlan.reason.code } : {}) },
  });
  add({
    id: 'platform.cufile.driver',
    status: !cufile.loaded || cudaProblem || (!cufile.driverOpen && !cufile.driverError && openPlan.open === 'never') ? 'info' : cufile.driverOpen ? 'pass' : 'fail',
    title: 'cuFile driver',
    summary: !cufile.loaded
      ? 'not opened: cuFile is not loaded'
      : cudaProblem
        ? 'not opened: no usable GPU'
        : !cufile.driverOpen && !cufile.driverError && openPlan.open === 'never'
          ? `not opened: ${openPlan.reason.code} (penstock's cuFile plan)`
          : cufile.driverOpen
          ? `open; nvidia-fs ${propsNvfs ?? '0.0 (none)'}, back ends ${backends?.length ? backends.join(', ') : 'none'}, compat mode ${propsCompat ? 'allowed' : propsCompat === false ? 'not allowed' : 'unknown'}`
          : `cuFileDriverOpen failed: ${cufile.driverError?.code ?? 'error'} ${cufile.driverError?.number ?? ''}`.trim(),
    ...(cufileProblem?.code === 'CUFILE_DRIVER_OPEN_FAILED' ? { fix: cufileProblem.message } : {}),
    data: { open: cufile.driverOpen, error: cufile.driverError, props, nvfsVersion: propsNvfs, backends, compatAllowed: propsCompat, statsLevel: cufile.statsLevel },
  });

  // nvidia-fs and P2PDMA
  const nvfsProc = root.text('/proc/driver/nvidia-fs/version');
  const nvfsVersion = /(\d+\.\d+(?:\.\d+)?)/.exec(nvfsProc ?? root.line('/sys/module/nvidia_fs/version') ?? '')?.[1];
  const nvfsLoaded = nvfsProc !== undefined || root.exists('/sys/module/nvidia_fs') || propsNvfs !== undefined;
  const nvfsDevices = root.list('/dev').filter((n) => n.startsWith('nvidia-fs')).length;
  const config = kernelConfig(root, release);
  const p2pLine = config && /^(CONFIG_PCI_P2PDMA=\w+|# CONFIG_PCI_P2PDMA is not set)$/m.exec(config)?.[1];
  const p2pdma: PlatformState['p2pdma'] = !config ? 'unknown' : p2pLine === 'CONFIG_PCI_P2PDMA=y' ? 'available' : 'absent';
  const cfg = readCuFileConfig(root, env);
  const usePciP2pdma = cfg.usePciP2pdma === true;
  const p2p = p2pdmaReadiness(root, p2pdma, nvidiaKernelModule(root), driverVersion, cfg, backends);
  const p2pPath = p2p.ready;
  add({
    id: 'platform.nvidia_fs',
    status: nvfsLoaded ? (nvfsDevices ? 'pass' : 'fail') : p2pPath ? 'info' : 'fail',
    title: 'nvidia-fs',
    summary: nvfsLoaded
      ? `loaded, version ${nvfsVersion ?? propsNvfs ?? 'unknown'}; ${nvfsDevices ? `${nvfsDevices} /dev/nvidia-fs* node(s)` : 'no /dev/nvidia-fs* nodes visible'}`
      : `not loaded (no /proc/driver/nvidia-fs)${p2pPath ? '; PCI P2PDMA is set up instead' : ''}`,
    ...(nvfsLoaded && !nvfsDevices ? { fix: 'make /dev/nvidia-fs* visible here (pass the devices into the container)' } : {}),
    ...(!nvfsLoaded && !p2pPath ? { fix: 'load the nvidia-fs kernel module (modprobe nvidia-fs)' } : {}),
    data: { loaded: nvfsLoaded, version: nvfsVersion ?? propsNvfs, devices: nvfsDevices },
  });
  add({
    id: 'platform.pci_p2pdma',
    status: p2pdma === 'available' ? 'pass' : 'info',
    title: 'PCI P2PDMA',
    summary:
      p2pdma === 'available'
        ? `the kernel has CONFIG_PCI_P2PDMA; cufile.json use_pci_p2pdma is ${usePciP2pdma ? 'on' : 'off'}`
        : p2pdma === 'absent'
          ? 'not built into this kernel (CONFIG_PCI_P2PDMA not set)'
          : 'unknown (no kernel config in /proc/config.gz or /boot)',
    data: { state: p2pdma, usePciP2pdma },
  });

  add(configCheck(cfg));
  add(cufileSettingsCheck(cfg, gpus));
  const stack = driverStackChecks(root, facts, gpus, env, p2p);
  stack.checks.forEach(add);
  const compat = compatState(env, cfg, propsCompat);
  add(compat.check);
  const vars = Object.keys(env).filter((k) => /^(CUFILE_|PENSTOCK_)/.test(k)).sort();
  add({
    id: 'platform.env',
    status: 'info',
    title: 'Environment',
    summary: vars.length ? vars.map((k) => `${k}=${env[k]}`).join(' ') : 'no CUFILE_* or PENSTOCK_* variables set',
    data: Object.fromEntries(vars.map((k) => [k, env[k]])),
  });

  // udev, IOMMU, container and VM
  const udevDatabase = root.exists('/run/udev/data');
  const container = containerHints(root, env);
  add({
    id: 'platform.udev',
    status: udevDatabase ? 'pass' : 'fail',
    title: 'udev database',
    summary: udevDatabase ? '/run/udev/data present' : root.exists('/run/udev') ? '/run/udev present but without data/' : 'no /run/udev',
    ...(udevDatabase ? {} : { fix: udevAdvice(container.length > 0) }),
    data: { present: udevDatabase },
  });
  const iommu = iommuState(root);
  add(iommu.check);
  const vm = vmHints(root);
  const containerShown = udevDatabase ? container : [...container, 'no /run/udev'];
  add({
    id: 'platform.container', status: 'info', title: 'Container',
    summary: container.length ? containerShown.join('; ') : `no container hints${udevDatabase ? '' : ' (but no /run/udev)'}`,
    data: { hints: container, udev: udevDatabase },
  });
  add({ id: 'platform.vm', status: 'info', title: 'Virtual machine', summary: vm.length ? vm.join('; ') : 'no VM hints', data: { hints: vm } });
  add(ioUringCheck(root, release));

  const state: PlatformState = {
    cudaUsable: !cudaProblem,
    ...(cudaProblem ? { cudaProblem, cudaFix: cudaAdvice(facts) } : {}),
    ...(driverVersion !== undefined ? { driverVersion } : {}),
    gpus: cudaProblem ? [] : gpus,
    cufileUsable: !cufileProblem,
    ...(cufileProblem ? { cufileProblem } : {}),
    nvfsLoaded,
    nvfsDevices,
    ...(backends ? { backends } : {}),
    compatAllowed: compat.allowed,
    ...(compat.forced ? { forceCompat: compat.forced } : {}),
    p2pdma,
    usePciP2pdma,
    p2pPath,
    ...(stack.wsl ? { wsl: stack.wsl } : {}),
    nvidiaPeermem: stack.peermem,
    cufileConfig: cfg,
    gdsThreshold: compat.gdsThreshold,
    penstockCompatMode: compat.penstock,
    udevDatabase,
    container,
    vm,
    iommu: iommu.state,
  };
  return { checks, state };
}

/** GeForce GPUs get no direct path from cuFile. */
export function isGeForce(name: string): boolean {
  return /geforce/i.test(name);
}

/** What to do when device memory cannot be used, by how far the CUDA driver got. */
function cudaAdvice(facts: PlatformFacts): string {
  if (facts.addonError) return "compile penstock's native addon from source (npx penstock-build)";
  if (!facts.cuda.loaded) return 'install the NVIDIA driver (libcuda.so.1), or point PENSTOCK_CUDA_LIBRARY at it';
  if (!facts.cuda.initialized) return 'make the driver usable (nvidia-smi shows why cuInit fails: a kernel module mismatch, missing /dev/nvidia* nodes)';
  return 'make a GPU visible to this process (pass the GPUs into the container; check CUDA_VISIBLE_DEVICES)';
}

/** What to do when there is no udev database (cuFile reads a device's file-system type from it). */
export function udevAdvice(inContainer: boolean): string {
  return inContainer
    ? 'mount /run/udev into the container (read-only is enough)'
    : 'run udev (systemd-udevd) or mount /run/udev, so that block devices have udev data';
}

function configCheck(cfg: CuFileConfig): Check {
  const values = {
    allow_compat_mode: cfg.allowCompatMode, force_compat_mode: cfg.forceCompatMode, use_pci_p2pdma: cfg.usePciP2pdma,
    'logging.level': cfg.loggingLevel, 'logging.dir': cfg.loggingDir, 'profile.cufile_stats': cfg.cufileStats,
  };
  const shown = Object.entries(values).filter(([, v]) => v !== undefined).map(([k, v]) => `${k}=${v}`);
  return {
    id: 'platform.cufile.config',
    status: cfg.error || cfg.unknown ? 'warn' : 'info',
    title: 'cufile.json',
    summary: cfg.unknown
      ? `${cfg.unknown}: cuFile's settings are unknown`
      : !cfg.found
      ? `${cfg.path} not found: cuFile uses its defaults`
      : cfg.error
        ? `${cfg.path} is not valid JSON: ${cfg.error}`
        : `${cfg.path}${cfg.source === 'CUFILE_ENV_PATH_JSON' ? ' (from CUFILE_ENV_PATH_JSON)' : ''}: ${shown.join(', ') || 'no route-related keys'}`,
    ...(cfg.error ? { fix: `fix the syntax of ${cfg.path}: cuFile falls back to its defaults when it cannot read it` } : {}),
    ...(cfg.unknown ? { fix: `make ${cfg.path} readable (on a recorded machine root, record the file the link points to as well)` } : {}),
    data: { path: cfg.path, source: cfg.source, found: cfg.found, error: cfg.error, unknown: cfg.unknown, ...values },
  };
}

/** A setting as the environment gives it (undefined where it does not, or gives it wrongly). */
function penstockSetting<K extends 'compatMode' | 'systemRoot'>(env: NodeJS.ProcessEnv, key: K): Settings[K] | undefined {
  try {
    return fromEnvironment(env)[key];
  } catch {
    return undefined;
  }
}

function compatState(env: NodeJS.ProcessEnv, cfg: CuFileConfig, propsCompat: boolean | undefined) {
  let penstock: CompatMode = 'auto';
  let gdsThreshold = defaults().gdsThreshold;
  let penstockError: string | undefined;
  try {
    const s = fromEnvironment(env);
    penstock = s.compatMode ?? 'auto';
    gdsThreshold = s.gdsThreshold ?? gdsThreshold;
  } catch (err) {
    penstockError = (err as Error).message;
  }
  const envForce = envFlag(env, 'CUFILE_FORCE_COMPAT_MODE');
  const envAllow = envFlag(env, 'CUFILE_ALLOW_COMPAT_MODE');
  // The environment overrides cufile.json; the open driver's own flags are the final word.
  const forced = envForce === true ? 'CUFILE_FORCE_COMPAT_MODE' : envForce === undefined && cfg.forceCompatMode ? `force_compat_mode in ${cfg.path}` : undefined;
  const allowed = propsCompat ?? envAllow ?? cfg.allowCompatMode ?? true;
  const problems = [
    ...(penstock === 'on' ? [compatModeOn().message] : []),
    ...(forced ? [`${forced} forces cuFile's compat mode`] : []),
    ...(penstockError ? [penstockError] : []),
  ];
  const check: Check = {
    id: 'platform.compat',
    status: problems.length ? 'fail' : 'pass',
    title: 'Compat mode',
    summary: problems.length
      ? problems.join('; ')
      : `penstock compatMode ${penstock}; cuFile compat mode ${allowed ? 'allowed as a fallback' : 'not allowed'}, not forced`,
    ...(problems.length ? { fix: `unset ${[penstock === 'on' ? 'PENSTOCK_COMPAT_MODE' : '', forced ?? ''].filter(Boolean).join(' and ') || 'the invalid setting'} to let files take the direct path` } : {}),
    data: { penstock, cufileAllowed: allowed, cufileForced: forced ?? null },
  };
  return { check, penstock, allowed, forced, gdsThreshold };
}

function iommuState(root: SysRoot): { state: PlatformState['iommu']; check: Check } {
  const units = root.list('/sys/class/iommu');
  const tokens = cmdlineTokens(root).filter((t) => /^(intel_iommu|amd_iommu|iommu|iommu\.passthrough)=/.test(t));
  const pt = tokens.some((t) => t === 'iommu=pt' || t === 'iommu.passthrough=1' || t === 'amd_iommu=pt');
  const state: PlatformState['iommu'] = units.length === 0 ? 'off' : pt ? 'passthrough' : 'on';
  const where = `${units.length ? `/sys/class/iommu: ${units.join(', ')}` : 'no IOMMU in /sys/class/iommu'}${tokens.length ? `; kernel command line: ${tokens.join(' ')}` : ''}`;
  return {
    state,
    check: {
      id: 'platform.iommu',
      status: state === 'on' ? 'warn' : 'pass',
      title: 'IOMMU',
      summary: `${state === 'on' ? 'on (translating DMA)' : state === 'passthrough' ? 'pass-through' : 'off'} (${where})`,
      ...(state === 'on' ? { fix: 'GPUDirect Storage needs DMA between the drive and the GPU untranslated: boot with iommu=pt (or the IOMMU off)' } : {}),
      data: { state, units, cmdline: tokens },
    },
  };
}

function containerHints(root: SysRoot, env: NodeJS.ProcessEnv): string[] {
  const hints: string[] = [];
  if (root.exists('/.dockerenv')) hints.push('/.dockerenv (Docker)');
  if (root.exists('/run/.containerenv')) hints.push('/run/.containerenv (Podman)');
  if (env.container) hints.push(`container=${env.container} in the environment`);
  const cg = /(docker|kubepods|containerd|libpod|lxc)/.exec(root.text('/proc/1/cgroup') ?? '')?.[1];
  if (cg) hints.push(`PID 1's cgroup names ${cg}`);
  return hints;
}

const VM_VENDORS = /(qemu|kvm|firecracker|vmware|xen|microsoft corporation|amazon ec2|google|innotek|virtualbox|parallels|openstack|cloud hypervisor|bochs)/i;

function vmHints(root: SysRoot): string[] {
  const hints: string[] = [];
  const hv = root.line('/sys/hypervisor/type');
  if (hv) hints.push(`/sys/hypervisor/type is ${hv}`);
  if (/^flags\s*:.*\bhypervisor\b/m.test(root.text('/proc/cpuinfo') ?? '')) hints.push("CPU flag 'hypervisor'");
  for (const f of ['sys_vendor', 'product_name']) {
    const v = root.line(`/sys/class/dmi/id/${f}`);
    if (v && VM_VENDORS.test(v)) hints.push(`DMI ${f} ${v}`);
  }
  if (cmdlineTokens(root).some((t) => /firecracker/i.test(t))) hints.push('kernel command line names Firecracker');
  const virtio = root.list('/sys/block').filter((n) => /^vd[a-z]+$/.test(n));
  if (virtio.length) hints.push(`virtio disks: ${virtio.join(', ')}`);
  return hints;
}
