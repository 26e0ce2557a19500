/**
 * Per-path facts: the mount and file system behind a path, the block device under it, udev's
 * data for that device, whether O_DIRECT opens work, and how the drive sits relative to the GPU.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { acsOf, bridgePath, locate, relation, type AcsState, type PcieRelation, type PciLocation } from './pci.js';
import type { SysRoot } from '../system/sysfs.js';
import type { GpuState } from './types.js';

export interface MountEntry {
  device: string;
  mountPoint: string;
  fsType: string;
  options: string[];
}

/** /proc/mounts escapes spaces, tabs, newlines and backslashes as octal. */
const unescape = (s: string) => s.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));

export function parseMounts(text: string): MountEntry[] {
  const out: MountEntry[] = [];
  for (const line of text.split('\n')) {
    const f = line.trim().split(/\s+/);
    if (f.length < 4) continue;
    out.push({ device: unescape(f[0]!), mountPoint: unescape(f[1]!), fsType: f[2]!, options: f[3]!.split(',') });
  }
  return out;
}

/** The mount a path lives on: the longest mount point that contains it, the later one on ties (it hides the earlier). */
export function findMount(mounts: MountEntry[], abs: string): MountEntry | undefined {
  let best: MountEntry | undefined;
  for (const m of mounts) {
    const mp = m.mountPoint;
    const inside = mp === '/' || abs === mp || abs.startsWith(mp.endsWith('/') ? mp : mp + '/');
    if (inside && (!best || mp.length >= best.mountPoint.length)) best = m;
  }
  return best;
}

export type BlockKind = 'nvme' | 'nvme-of' | 'virtio' | 'loop' | 'md' | 'dm' | 'scsi' | 'xen' | 'zram' | 'mmc' | 'network' | 'other';

export interface BlockDevice {
  name: string;
  majmin: string;
  kind: BlockKind;
  sysPath: string;
  /** The whole disk, when this is a partition. */
  disk?: string;
  /** The devices under an md array or a device-mapper volume. */
  members?: BlockDevice[];
  /** Where the drive's controller sits on PCIe. */
  pci?: PciLocation;
  /** md: the RAID level (`raid0`, `raid1`, …) from md/level. */
  mdLevel?: string;
  /** dm: what the volume is, from the prefix of dm/uuid (`LVM`, `CRYPT`, `mpath`, …), and its name. */
  dmTarget?: string;
  dmName?: string;
  /** NVMe: the namespace's end-to-end protection format (integrity/format), when not `none`. */
  protection?: string;
}

function kindOf(name: string, sysPath: string): BlockKind {
  if (/^nvme\d+(c\d+)?n\d+/.test(name)) return 'nvme';
  if (/^vd[a-z]+/.test(name) || sysPath.includes('/virtio')) return 'virtio';
  if (/^loop\d+/.test(name)) return 'loop';
  if (/^md/.test(name)) return 'md';
  if (/^dm-\d+/.test(name)) return 'dm';
  if (/^sd[a-z]+/.test(name)) return 'scsi';
  if (/^xvd/.test(name)) return 'xen';
  if (/^zram/.test(name)) return 'zram';
  if (/^mmcblk/.test(name)) return 'mmc';
  if (/^(rbd|nbd|drbd)\d+/.test(name)) return 'network';
  return 'other';
}

/**
 * An NVMe namespace's controllers: the one it hangs under (PCIe or fabrics), or, with native
 * multipath (the namespace under /sys/devices/virtual/nvme-subsystem), every one of the subsystem.
 */
function nvmeControllers(root: SysRoot, diskPath: string): string[] {
  const parent = path.posix.dirname(diskPath);
  if (/^nvme\d+$/.test(path.posix.basename(parent))) return [parent];
  return root.list(parent).filter((n) => /^nvme\d+$/.test(n)).map((n) => root.link(`${parent}/${n}`) ?? `${parent}/${n}`);
}

const WHOLE_DISK = /^(nvme\d+(c\d+)?n\d+|vd[a-z]+|sd[a-z]+|xvd[a-z]+|mmcblk\d+|md\d+|loop\d+)$/;

export function blockDevice(root: SysRoot, majmin: string, depth = 0): BlockDevice | undefined {
  const sysPath = root.link(`/sys/dev/block/${majmin}`);
  if (!sysPath) return undefined;
  const name = path.posix.basename(sysPath);
  const parentPath = path.posix.dirname(sysPath);
  const parent = path.posix.basename(parentPath);
  // sda → sda1, but nvme0n1 → nvme0n1p1: names ending in a digit take a 'p' before the number.
  const suffix = name.startsWith(parent) ? name.slice(parent.length) : '';
  const isPartition = WHOLE_DISK.test(parent) && (/\d$/.test(parent) ? /^p\d+$/ : /^\d+$/).test(suffix);
  const diskPath = isPartition ? parentPath : sysPath;
  let kind = kindOf(name, sysPath);
  const dev: BlockDevice = { name, majmin, kind, sysPath, ...(diskPath !== sysPath ? { disk: parent } : {}) };
  if (kind === 'nvme') {
    const ctrls = nvmeControllers(root, diskPath);
    const transports = ctrls.map((c) => root.line(`${c}/transport`) ?? (c.includes('/pci') ? 'pcie' : 'unknown'));
    if (transports.length && transports.every((t) => t !== 'pcie')) kind = dev.kind = 'nvme-of';
    const pci = ctrls.map((c) => locate(root, c)).find((l) => l !== undefined);
    if (pci) dev.pci = pci;
  } else {
    const pci = locate(root, sysPath);
    if (pci) dev.pci = pci;
  }
  if (kind === 'md') {
    const level = root.line(`${diskPath}/md/level`);
    if (level) dev.mdLevel = level;
  }
  if (kind === 'dm') {
    const uuid = root.line(`${diskPath}/dm/uuid`);
    const target = uuid ? /^([A-Za-z]+)-/.exec(uuid)?.[1] : undefined;
    if (target) dev.dmTarget = target;
    const dmName = root.line(`${diskPath}/dm/name`);
    if (dmName) dev.dmName = dmName;
  }
  if (kind === 'nvme') {
    const pi = root.line(`${diskPath}/integrity/format`);
    if (pi && pi !== 'none') dev.protection = pi;
  }
  if ((kind === 'md' || kind === 'dm') && depth < 4) {
    const members = root
      .list(`${diskPath}/slaves`)
      .map((m) => root.line(`${root.link(`${diskPath}/slaves/${m}`) ?? `${diskPath}/slaves/${m}`}/dev`))
      .filter((x): x is string => x !== undefined)
      .map((mm) => blockDevice(root, mm, depth + 1))
      .filter((x): x is BlockDevice => x !== undefined);
    if (members.length) dev.members = members;
  }
  return dev;
}

/**
 * A block device's major:minor from its name. Kernels and copied trees differ in which of the
 * three sysfs views they have, so each is asked in turn: /sys/class/block/NAME/dev,
 * /sys/block/NAME/dev (whole disks), then the /sys/dev/block/MAJ:MIN link that ends in NAME.
 */
export function majminOfName(root: SysRoot, name: string): string | undefined {
  const direct = root.line(`/sys/class/block/${name}/dev`) ?? root.line(`/sys/block/${name}/dev`);
  if (direct) return direct;
  return root.list('/sys/dev/block').find((mm) => path.posix.basename(root.link(`/sys/dev/block/${mm}`) ?? '') === name);
}

/** The block devices that hold the data: the device itself, or the leaves under md and dm. */
export function leaves(dev: BlockDevice): BlockDevice[] {
  return dev.members ? dev.members.flatMap(leaves) : [dev];
}

export interface UdevData {
  file: string;
  present: boolean;
  usage?: string;
  fsType?: string;
  /** MD_LEVEL, which md arrays get only from the udev rule that imports mdadm's details. */
  mdLevel?: string;
}

export function udevData(root: SysRoot, majmin: string): UdevData {
  const file = `/run/udev/data/b${majmin}`;
  const text = root.text(file);
  if (text === undefined) return { file, present: false };
  const prop = (k: string) => new RegExp(`^E:${k}=(.*)$`, 'm').exec(text)?.[1];
  const usage = prop('ID_FS_USAGE');
  const fsType = prop('ID_FS_TYPE');
  const mdLevel = prop('MD_LEVEL');
  return { file, present: true, ...(usage !== undefined ? { usage } : {}), ...(fsType !== undefined ? { fsType } : {}), ...(mdLevel !== undefined ? { mdLevel } : {}) };
}

/** A recorded root's stand-in for stat(): `/stat.json` maps paths to `{ "dev": "259:1", "type": "file" }`. */
interface RecordedStat {
  dev?: string;
  type?: 'file' | 'directory' | 'other';
  size?: number;
  /** Inode flags as `lsattr` prints them (e.g. `----i---------e-------`). */
  lsattr?: string;
}

/** The inode flags that make cuFile (or the kernel's O_DIRECT path) refuse or stage a file. */
export const FILE_FLAGS: Readonly<Record<string, string>> = { i: 'immutable', a: 'append-only', c: 'compressed', E: 'encrypted', V: 'verity' };

/** The named flags in `lsattr`'s first column. */
export function parseLsattr(column: string): string[] {
  return [...new Set([...column].filter((c) => FILE_FLAGS[c]).map((c) => FILE_FLAGS[c]!))];
}

function liveFlags(p: string): string[] | undefined {
  // lsattr asks the file system with FS_IOC_GETFLAGS; Node has no way to, and nothing needs root.
  const r = spawnSync('lsattr', ['-d', p], { encoding: 'utf8', timeout: 5000 });
  if (r.status !== 0 || !r.stdout) return undefined;
  return parseLsattr(r.stdout.trim().split(/\s+/)[0] ?? '');
}

export interface PathFacts {
  /** The path that was examined (the nearest existing ancestor when the path does not exist). */
  examined: string;
  exists: boolean;
  type: 'file' | 'directory' | 'other';
  statError?: string;
  mount?: MountEntry;
  majmin?: string;
  block?: BlockDevice;
  udev?: UdevData;
  oDirect: { state: 'ok' | 'refused' | 'untested'; why?: string };
  /** The file's size in bytes (files only). */
  size?: number;
  /** Inode flags that matter to cuFile (`immutable`, `append-only`, `compressed`, `encrypted`, `verity`); undefined when unknown. */
  flags?: string[];
  pcie?: { gpu: number; relation: PcieRelation; bridges: string[]; acs: AcsState[]; others: { gpu: number; relation: PcieRelation }[] };
}

/** The kernel's dev_t split: the major and minor numbers are each stored in two pieces. */
function majminOf(dev: bigint): string {
  const major = ((dev >> 8n) & 0xfffn) | ((dev >> 32n) & ~0xfffn);
  const minor = (dev & 0xffn) | ((dev >> 12n) & ~0xffn);
  return `${major}:${minor}`;
}

function statOf(root: SysRoot, p: string, recorded: Record<string, RecordedStat> | undefined): { type: PathFacts['type']; majmin?: string; size?: number } | { error: string } {
  if (!root.live) {
    const r = recorded?.[p];
    if (r) return { type: r.type ?? 'file', ...(r.dev ? { majmin: r.dev } : {}), ...(r.size !== undefined ? { size: r.size } : {}) };
    if (!root.exists(p)) return { error: 'ENOENT' };
    const st = fs.statSync(root.hostPath(p));
    return { type: st.isDirectory() ? 'directory' : st.isFile() ? 'file' : 'other', ...(st.isFile() ? { size: st.size } : {}) };
  }
  try {
    const st = fs.statSync(p, { bigint: true });
    return { type: st.isDirectory() ? 'directory' : st.isFile() ? 'file' : 'other', majmin: majminOf(st.dev), ...(st.isFile() ? { size: Number(st.size) } : {}) };
  } catch (err) {
    return { error: (err as NodeJS.ErrnoException).code ?? 'EIO' };
  }
}

function tryODirect(p: string): PathFacts['oDirect'] {
  try {
    fs.closeSync(fs.openSync(p, fs.constants.O_RDONLY | fs.constants.O_DIRECT));
    return { state: 'ok' };
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? 'error';
    // EINVAL is the file system saying no to O_DIRECT; anything else (EACCES…) says nothing about it.
    return code === 'EINVAL' ? { state: 'refused', why: code } : { state: 'untested', why: `open failed with ${code}` };
  }
}

/** Gathers the facts for one absolute path. */
export function inspectPath(root: SysRoot, abs: string, gpus: GpuState[]): PathFacts {
  let recorded: Record<string, RecordedStat> | undefined;
  if (!root.live) {
    try {
      recorded = JSON.parse(root.text('/stat.json') ?? '{}') as Record<string, RecordedStat>;
    } catch {
      recorded = undefined;
    }
  }
  let examined = abs;
  let st = statOf(root, examined, recorded);
  const exists = !('error' in st);
  const statError = 'error' in st ? st.error : undefined;
  while ('error' in st && examined !== '/') {
    examined = path.posix.dirname(examined);
    st = statOf(root, examined, recorded);
  }
  const type = 'error' in st ? 'other' : st.type;
  const size = !('error' in st) && exists ? st.size : undefined;
  const facts: PathFacts = { examined, exists, type, ...(statError ? { statError } : {}), ...(size !== undefined ? { size } : {}), oDirect: { state: 'untested' } };

  const mount = findMount(parseMounts(root.text('/proc/mounts') ?? ''), examined);
  if (mount) facts.mount = mount;

  // stat().dev names the file system's device; for a recorded root, or where dev is an
  // anonymous number with no block device, the mount's device is the next best source.
  let majmin = 'error' in st ? undefined : st.majmin;
  if ((!majmin || !root.link(`/sys/dev/block/${majmin}`)) && mount?.device.startsWith('/dev/')) {
    const name = path.posix.basename(root.link(mount.device) ?? mount.device);
    majmin = majminOfName(root, name) ?? majmin;
  }
  if (majmin) {
    facts.majmin = majmin;
    const block = blockDevice(root, majmin);
    if (block) {
      facts.block = block;
      facts.udev = udevData(root, majmin);
    }
  }

  if (exists && type === 'file') {
    const flags = root.live ? liveFlags(examined) : recorded?.[examined]?.lsattr !== undefined ? parseLsattr(recorded[examined]!.lsattr!) : undefined;
    if (flags) facts.flags = flags;
  }
  if (root.live && type === 'file') facts.oDirect = tryODirect(examined);
  else facts.oDirect = { state: 'untested', why: !root.live ? 'recorded root: no real open' : type === 'directory' ? 'a directory: O_DIRECT is checked on files' : 'not a regular file' };

  // Only a local NVMe drive can talk to the GPU directly, so only its place in the tree matters.
  const drive = facts.block ? leaves(facts.block).find((d) => d.pci && d.kind === 'nvme') : undefined;
  const located = gpus.flatMap((g) => {
    const gl = g.sysPath ? locate(root, g.sysPath) : undefined;
    return gl ? [{ g, gl }] : [];
  });
  if (drive?.pci && located.length) {
    const rels = located.map(({ g, gl }) => ({ g, gl, ...relation(gl, drive.pci!) }));
    const first = rels[0]!;
    const acs = first.bridges.map((b) => {
      const dir = bridgePath(first.gl, b) ?? bridgePath(drive.pci!, b);
      return dir ? acsOf(root, dir) : { bridge: b, state: 'unreadable' as const };
    });
    facts.pcie = {
      gpu: first.g.ordinal, relation: first.relation, bridges: first.bridges, acs,
      others: rels.slice(1).map((r) => ({ gpu: r.g.ordinal, relation: r.relation })),
    };
  }
  return facts;
}
