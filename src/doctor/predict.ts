/**
 * The route a file's device reads will take, predicted from the platform and path facts, with
 * every obstacle to the direct path as a sentence that says what to do.
 *
 * Two kinds of obstacle differ in their outcome. Some make cuFile (or penstock) refuse the file
 * outright, so penstock stages the reads itself (`posix-device`); the rest let cuFile accept the
 * file but move the data through host memory itself (`cufile-compat`), when compat is allowed.
 */
import { compatModeOn, ROUTE_MEANINGS } from '../vocabulary/reasons.js';
import { isGeForce, udevAdvice } from './platform.js';
import { leaves, type BlockDevice, type PathFacts } from './paths.js';
import type { Finding, PlatformState, Prediction } from './types.js';

const DISTRIBUTED: Record<string, string> = { lustre: 'LUSTRE', gpfs: 'GPFS', wekafs: 'WEKAFS', beegfs: 'BEEGFS' };

/** Why cuFile would refuse the file (or penstock would not ask it): each means `posix-device`. */
function refusals(p: PlatformState, f: PathFacts): Finding[] {
  const out: Finding[] = [];
  if (p.penstockCompatMode === 'on') out.push({ ...compatModeOn(), check: 'platform.compat' });
  if (p.cufileProblem) out.push(p.cufileProblem);
  if (f.exists && f.type === 'other')
    out.push({ code: 'NOT_REGULAR_FILE', check: 'path.exists', message: 'cuFile registers only regular files: read a regular file' });
  if (!p.udevDatabase) {
    out.push({
      code: 'NO_UDEV',
      check: 'path.udev',
      message: `${udevAdvice(p.container.length > 0)}: without udev data cuFile refuses to register files (5027, HANDLE_NOT_REGISTERED)`,
    });
  } else if (f.block && f.udev && (!f.udev.present || f.udev.usage === undefined || f.udev.fsType === undefined)) {
    const dev = `/dev/${f.block.name}`;
    out.push({
      code: 'UDEV_NO_DATA',
      check: 'path.udev',
      message: `make udev record ${dev} (udevadm trigger --action=change ${dev}): ${f.udev.present ? `${f.udev.file} lacks ID_FS_USAGE or ID_FS_TYPE` : `there is no ${f.udev.file}`}, so cuFile refuses to register files on it (5027)`,
    });
  }
  const m = f.mount;
  const deny = p.cufileConfig.denylist;
  const denied = m && (deny.mounts.some((x) => x === m.mountPoint) ? `mount ${m.mountPoint}` : deny.filesystems.includes(m.fsType) ? `file system ${m.fsType}`
    : f.block && deny.devices.some((x) => x === `/dev/${f.block!.name}` || x === f.block!.name) ? `device /dev/${f.block.name}` : undefined);
  if (denied)
    out.push({ code: 'CUFILE_DENYLISTED', check: 'platform.cufile.settings', message: `remove ${denied} from the deny list in ${p.cufileConfig.path}: cuFile refuses I/O there (5034, IO_DISABLED)` });
  if (m && NO_MODE.has(m.fsType))
    out.push({ code: 'FS_REFUSED', check: 'path.fs.supported', message: `cuFile takes no files on ${m.fsType}, not even in compat mode: put the data on ext4 or XFS` });
  return out;
}

/** File systems on which cuFile is reported to register nothing, compat mode included. */
const NO_MODE = new Set(['vfat', 'msdos', 'exfat']);
/** File systems cuFile can read only in compat mode, by their nature (no block device it can DMA to). */
const COMPAT_ONLY = new Set(['tmpfs', 'ramfs', 'overlay', 'zfs', 'btrfs', 'fuse', 'fuseblk', 'cifs', 'smb3', 'squashfs']);
/** RDMA file systems whose direct path goes through user-space RDMA (nvidia_peermem and rdma_dev_addr_list). */
const USERSPACE_RDMA = new Set(['wekafs', 'gpfs']);

/**
 * Whether the open cuFile driver leaves out a back end. An empty list says only that there is no
 * kernel path at all, which NO_NVIDIA_FS already reports.
 */
const lacks = (p: PlatformState, backend: string) => !!p.backends?.length && !p.backends.includes(backend);

const DM_TARGETS: Record<string, string> = { LVM: 'an LVM logical volume', CRYPT: 'a dm-crypt volume', mpath: 'a dm-multipath device', part: 'a device-mapper partition' };

function driveObstacles(p: PlatformState, dev: BlockDevice, udev?: PathFacts['udev']): Finding[] {
  const check = 'path.block_device';
  switch (dev.kind) {
    case 'nvme':
      if (dev.protection)
        return [{ code: 'NVME_PROTECTION_INFO', check, message: `${dev.disk ?? dev.name} is formatted with protection information (${dev.protection}): the direct path needs a namespace without it (nvme format --pi=0, which erases it)` }];
      return !(lacks(p, 'NVME') && lacks(p, 'NVME_P2P'))
        ? []
        : [{ code: 'NVME_NOT_SUPPORTED', check, message: 'the cuFile driver reports no NVMe support ("NVMe Driver not registered with nvidia-fs"): use an NVMe driver that registers with nvidia-fs (a GDS-enabled kernel or MOFED NVMe stack) and the nvidia-fs built for it, or the P2PDMA path' }];
    case 'nvme-of':
      return !lacks(p, 'NVMEOF') ? [] : [{ code: 'NVMEOF_NOT_SUPPORTED', check, message: 'the cuFile driver reports no NVMe-oF support: install nvidia-fs with NVMe-oF (RDMA) support' }];
    case 'virtio':
      return [{ code: 'VIRTIO_DISK', check, message: `this disk is virtio, not NVMe (${dev.name}): no direct path in this VM; pass an NVMe drive through to the VM for GPUDirect Storage` }];
    case 'loop':
      return [{ code: 'LOOP_DEVICE', check, message: `the file system sits on a loop device (${dev.name}), which is backed by a file: no direct path; put the data on an NVMe file system` }];
    case 'scsi':
      return p.backends?.includes('SCSI')
        ? []
        : [{ code: 'SCSI_DISK', check, message: `${dev.name} is a SCSI/SATA disk, not NVMe: no direct path; put the data on an NVMe drive` }];
    case 'md': {
      const bad = (dev.members ? leaves(dev) : []).filter((m) => m.kind !== 'nvme' && m.kind !== 'nvme-of');
      if (!dev.members) return [{ code: 'MD_UNKNOWN_MEMBERS', check, message: `the members of ${dev.name} are not visible: the direct path needs an md array of NVMe drives` }];
      if (bad.length)
        return [{ code: 'MD_NOT_NVME', check, message: `${dev.name} is an md array over ${bad.map((m) => `${m.name} (${m.kind})`).join(', ')}: the direct path needs NVMe members only` }];
      if (dev.mdLevel && dev.mdLevel !== 'raid0')
        return [{ code: 'MD_RAID_LEVEL', check, message: `${dev.name} is ${dev.mdLevel}: cuFile's direct path over md is documented for RAID0 only; use RAID0 over NVMe (or plain NVMe)` }];
      if (udev && udev.present && udev.mdLevel === undefined)
        return [{ code: 'MD_NO_UDEV_RULE', check: 'path.udev', message: `${udev.file} has no MD_LEVEL: add the udev rule for md arrays that GDS documents (mdadm --detail --export imported for md devices), then udevadm trigger` }];
      return [];
    }
    case 'dm': {
      const what = DM_TARGETS[dev.dmTarget ?? ''] ?? 'a device-mapper volume';
      const named = dev.dmName ? ` (${dev.dmName})` : '';
      const under = dev.members?.length ? ` over ${leaves(dev).map((m) => m.name).join(', ')}` : '';
      return [{ code: 'DEVICE_MAPPER', check, message: `${dev.name}${named} is ${what}${under}: cuFile logs "Unsupported block device: /dev/${dev.name}" and stages it; put the data on a plain NVMe partition or an md RAID0 of NVMe drives` }];
    }
    default:
      return [{ code: 'UNSUPPORTED_DEVICE', check, message: `${dev.name} is a ${dev.kind} device, not NVMe: no direct path` }];
  }
}

/** What keeps the data off the direct path even when cuFile accepts the file. */
function directObstacles(p: PlatformState, f: PathFacts): Finding[] {
  const out: Finding[] = [];
  const p2pPath = p.p2pPath;
  if (!p.nvfsLoaded && !p2pPath)
    out.push({
      code: 'NO_NVIDIA_FS',
      check: 'platform.nvidia_fs',
      message: 'load the nvidia-fs kernel module (modprobe nvidia-fs); with CUDA ≥ 12.8 on a kernel with PCI P2PDMA, properties.use_pci_p2pdma in cufile.json is the alternative',
    });
  else if (p.nvfsLoaded && p.nvfsDevices === 0 && !p2pPath)
    out.push({ code: 'NO_NVIDIA_FS_DEVICES', check: 'platform.nvidia_fs', message: 'make /dev/nvidia-fs* visible here (pass the devices into the container)' });
  if (p.forceCompat) out.push({ code: 'COMPAT_FORCED', check: 'platform.compat', message: `remove ${p.forceCompat}: it sends every cuFile read through host memory` });
  const geforce = p.gpus.find((g) => g.ordinal === 0 && isGeForce(g.name));
  if (geforce) out.push({ code: 'GEFORCE_GPU', check: 'platform.gpus', message: `GPU 0 is a ${geforce.name}: cuFile gives GeForce GPUs no direct path; use a data-centre or workstation GPU` });
  if (p.wsl) out.push({ code: 'WSL', check: 'platform.gpu.virtual', message: `this is WSL (${p.wsl}): cuFile runs only in compat mode there; use Linux itself for GPUDirect Storage` });
  const flags = f.flags ?? [];
  if (flags.length)
    out.push({ code: 'FILE_FLAGS', check: 'path.flags', message: `the file is ${flags.join(', ')} (lsattr): cuFile cannot DMA such files directly; copy the data into a plain file (chattr -${flags.map((x) => FLAG_LETTER[x]).join('')} where allowed)` });

  const m = f.mount;
  if (!m) {
    out.push({ code: 'NO_MOUNT', check: 'path.mount', message: 'the mount behind this path was not found in /proc/mounts: mount it where this process can see it' });
    return out;
  }
  const fsType = m.fsType;
  const drive = (): Finding[] =>
    f.block ? driveObstacles(p, f.block, f.udev) : [{ code: 'NO_BLOCK_DEVICE', check: 'path.block_device', message: `no block device was found under this ${fsType} file system: the direct path needs one on NVMe` }];
  if (fsType === 'ext4') {
    if (!m.options.includes('data=ordered'))
      out.push({
        code: 'EXT4_NOT_DATA_ORDERED',
        check: 'path.fs.data_ordered',
        message: `remount ext4 with data=ordered written in its options (add data=ordered for ${m.mountPoint} in /etc/fstab and mount it again): cuFile needs to see it`,
      });
    out.push(...drive());
  } else if (fsType === 'xfs') {
    out.push(...drive());
  } else if (fsType === 'nfs' || fsType === 'nfs4') {
    if (!m.options.some((o) => o === 'rdma' || o === 'proto=rdma'))
      out.push({ code: 'NFS_WITHOUT_RDMA', check: 'path.fs.supported', message: `NFS needs RDMA for the direct path: mount ${m.mountPoint} with proto=rdma` });
    else if (lacks(p, 'NFS'))
      out.push({ code: 'NFS_NOT_SUPPORTED', check: 'path.fs.supported', message: 'the cuFile driver reports no NFS support: install nvidia-fs built with RDMA (MOFED) support' });
  } else if (DISTRIBUTED[fsType]) {
    if (lacks(p, DISTRIBUTED[fsType]!))
      out.push({ code: 'FS_BACKEND_MISSING', check: 'path.fs.supported', message: `the cuFile driver reports no ${fsType} support: install the ${fsType} client with GPUDirect Storage support` });
    else if (USERSPACE_RDMA.has(fsType) && !p.nvidiaPeermem)
      out.push({ code: 'NO_NVIDIA_PEERMEM', check: 'platform.nvidia_peermem', message: `load nvidia_peermem (modprobe nvidia_peermem): ${fsType} reaches GPU memory through user-space RDMA, which cuFile disables without it` });
    else if (USERSPACE_RDMA.has(fsType) && !p.cufileConfig.rdmaDevAddrList?.length)
      out.push({ code: 'NO_RDMA_ADDRESSES', check: 'platform.cufile.settings', message: `list the RDMA interfaces' addresses in properties.rdma_dev_addr_list of ${p.cufileConfig.path}: ${fsType} uses no RDMA device without them` });
  } else if (COMPAT_ONLY.has(fsType) || fsType.startsWith('fuse.')) {
    out.push({ code: 'FS_COMPAT_ONLY', check: 'path.fs.supported', message: `${fsType} is read by cuFile only in compat mode (it has no NVMe block device cuFile can DMA to): put the data on ext4 or XFS on NVMe` });
  } else if (NO_MODE.has(fsType)) {
    // Reported as a refusal above.
  } else {
    out.push({ code: 'FS_NOT_SUPPORTED', check: 'path.fs.supported', message: `${fsType} is not supported by cuFile: only compat mode; put the data on ext4 or XFS on NVMe` });
  }
  if (f.oDirect.state === 'refused')
    out.push({ code: 'O_DIRECT_REFUSED', check: 'path.o_direct', message: 'this file system refuses O_DIRECT opens (EINVAL), which the direct path needs: put the data on ext4 or XFS on NVMe' });
  return out;
}

function warningsFor(p: PlatformState, f: PathFacts, route: Prediction['route']): Finding[] {
  const out: Finding[] = [];
  const pcie = f.pcie;
  if (pcie && f.block) {
    const drive = leaves(f.block).find((d) => d.pci && d.kind === 'nvme')?.name ?? f.block.name;
    const where = `GPU ${pcie.gpu} and ${drive}`;
    if (pcie.relation === 'SYS')
      out.push({ code: 'PCIE_CROSS_SOCKET', check: 'path.pcie', message: `${where} are on different CPU sockets (SYS): the direct path crosses the link between sockets and is slow; use a drive on the GPU's socket, or a GPU on the drive's` });
    else if (pcie.relation === 'NODE' || pcie.relation === 'PHB')
      out.push({ code: 'PCIE_NO_SHARED_SWITCH', check: 'path.pcie', message: `${where} meet only ${pcie.relation === 'PHB' ? 'at the host bridge (PHB)' : 'between host bridges (NODE)'}: the direct path works, but a drive under the GPU's PCIe switch (PIX/PXB) is faster` });
    const redirect = pcie.acs.filter((a) => a.state === 'redirect').map((a) => a.bridge);
    if (redirect.length)
      out.push({ code: 'ACS_REDIRECT', check: 'path.acs', message: `turn ACS off on ${redirect.join(', ')}: ACS redirects peer-to-peer traffic between the drive and the GPU up to the root complex` });
  }
  if (p.iommu === 'on' && route === 'gds')
    out.push({ code: 'IOMMU_ON', check: 'platform.iommu', message: 'boot with iommu=pt (or the IOMMU off): with DMA translated the direct path may fail or slow down' });
  if (route === 'posix-device' && p.penstockCompatMode === 'off')
    out.push({ code: 'COMPAT_OFF_WILL_FAIL', check: 'platform.compat', message: "PENSTOCK_COMPAT_MODE=off: device reads of this file will fail with an error instead of falling back" });
  return out;
}

export function predict(p: PlatformState, f: PathFacts): Prediction {
  // Without a GPU the other obstacles still matter to whoever is setting the machine up.
  // penstock not opening cuFile for want of a direct path follows from the obstacles listed
  // before it (NO_NVIDIA_FS first): it comes last, and it makes the route staged.
  const unopened = p.cufileProblem?.code === 'CUFILE_NO_DIRECT_PATH' ? [p.cufileProblem] : [];
  const refused = refusals(p, f).filter((r) => r.code !== 'NO_CUDA' && r.code !== 'CUFILE_NO_DIRECT_PATH');
  // Where penstock keeps cuFile closed because its compat mode is forced, that is the one reason.
  const direct = directObstacles(p, f).filter((d) => !(d.code === 'COMPAT_FORCED' && p.cufileProblem?.code === 'CUFILE_COMPAT_FORCED'));
  if (!p.cudaUsable) {
    const noCuda: Finding = {
      code: 'NO_CUDA',
      check: 'platform.cuda.driver',
      message: `${p.cudaFix ?? 'install the NVIDIA driver'} to read into GPU memory; now: ${p.cudaProblem ?? 'no CUDA driver'}`,
    };
    return { route: 'posix-host', blockers: [noCuda, ...refused, ...direct, ...unopened], warnings: [] };
  }
  let route: Prediction['route'];
  const blockers = [...refused, ...direct];
  if (refused.length || unopened.length) route = 'posix-device';
  else if (!direct.length) route = 'gds';
  else if (p.compatAllowed) route = 'cufile-compat';
  else {
    route = 'posix-device';
    blockers.push({ code: 'COMPAT_NOT_ALLOWED', check: 'platform.compat', message: "cuFile's compat mode is not allowed, so cuFile refuses files it cannot read directly and penstock stages them" });
  }
  blockers.push(...unopened);
  return { route, blockers, warnings: warningsFor(p, f, route) };
}

const ROUTE_WORDS: Record<Prediction['route'], string> = { ...ROUTE_MEANINGS, 'posix-host': 'no usable GPU: host reads only' };

const FLAG_LETTER: Record<string, string> = { immutable: 'i', 'append-only': 'a', compressed: 'c', encrypted: 'E', verity: 'V' };

/** One line: the route, what it means, and the first thing to change (and how many more). */
export function verdictLine(route: Prediction['route'], blockers: Finding[]): string {
  const head = `${route} (${ROUTE_WORDS[route]})`;
  if (!blockers.length) return head;
  const more = blockers.length > 1 ? ` (+${blockers.length - 1} more)` : '';
  return `${head}: ${blockers[0]!.message}${more}`;
}
