/**
 * The block device under a file, as sysfs describes it: its name and whether it is an NVMe
 * drive that does not rotate. Read once per device (two small sysfs files), for the choice
 * between O_DIRECT and the page cache for reads that come from the disk.
 */
import { posix } from 'node:path';
import type { SysRoot } from './sysfs.js';

/** The storage under a file. */
export interface StorageFacts {
  /** The block device's name (the whole drive's, for a partition), e.g. `nvme0n1`, `vda`. */
  device: string;
  /** `queue/rotational` of the drive; undefined where sysfs does not say. */
  rotational: boolean | undefined;
  /** An NVMe namespace (`nvme*`). */
  nvme: boolean;
}

/** Linux's `dev_t` split as glibc's `major()` and `minor()` do. */
export function splitDev(dev: number): { major: number; minor: number } {
  const hi = Math.floor(dev / 2 ** 32);
  const lo = dev >>> 0;
  return { major: ((lo >>> 8) & 0xfff) | ((hi & 0xfffff000) >>> 0), minor: (lo & 0xff) | ((lo >>> 12) & 0xfff00) };
}

/**
 * The storage behind device number `dev` (a file's `st_dev`), or undefined where there is no
 * block device (tmpfs, network file systems) or sysfs does not show it.
 */
export function storageOf(dev: number, root: SysRoot): StorageFacts | undefined {
  const { major, minor } = splitDev(dev);
  if (major === 0) return undefined;
  const node = root.link(`/sys/dev/block/${major}:${minor}`);
  if (!node) return undefined;
  // A partition's queue is its drive's.
  const drive = root.exists(`${node}/partition`) ? posix.dirname(node) : node;
  const name = posix.basename(drive);
  const rot = root.line(`${drive}/queue/rotational`);
  return { device: name, rotational: rot === undefined ? undefined : rot === '1', nvme: name.startsWith('nvme') };
}
