/**
 * PCIe facts from sysfs: where a device hangs in the tree, how far apart two devices are, the
 * GPU's BAR1 and the ACS setting of the bridges in between.
 */
import type { SysRoot } from '../system/sysfs.js';

const BDF = /^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$/;
const HOST_BRIDGE = /^pci[0-9a-f]{4}:[0-9a-f]{2}$/;

/** `0000:41:00.0` from the forms CUDA and tools print (`00000000:41:00.0`, `41:00.0`, upper case). */
export function normalizeBdf(id: string): string | undefined {
  const m = /^(?:([0-9a-f]+):)?([0-9a-f]{1,2}):([0-9a-f]{1,2})\.([0-7])$/i.exec(id.trim());
  if (!m) return undefined;
  const domain = (m[1] ?? '0').slice(-4).padStart(4, '0');
  return `${domain}:${m[2]!.padStart(2, '0')}:${m[3]!.padStart(2, '0')}.${m[4]}`.toLowerCase();
}

/** Where a device sits: its host bridge and the PCI functions from the root port down to it. */
export interface PciLocation {
  hostBridge: string;
  /** Bus ids from the root port down; the last one is the device itself. */
  chain: string[];
  /** The device's directory under /sys/devices. */
  devicePath: string;
  numaNode?: number;
}

/** The PCI location of any sysfs device path (a GPU's, or a block device's). */
export function locate(root: SysRoot, sysPath: string): PciLocation | undefined {
  const parts = sysPath.split('/').filter(Boolean);
  const at = parts.findIndex((p) => HOST_BRIDGE.test(p));
  if (at < 0) return undefined;
  const chain: string[] = [];
  for (const p of parts.slice(at + 1)) {
    if (!BDF.test(p)) break;
    chain.push(p);
  }
  if (chain.length === 0) return undefined;
  const devicePath = '/' + parts.slice(0, at + 1 + chain.length).join('/');
  const numa = Number(root.line(`${devicePath}/numa_node`));
  return { hostBridge: parts[at]!, chain, devicePath, ...(Number.isInteger(numa) && numa >= 0 ? { numaNode: numa } : {}) };
}

/** The device directory of a PCI function, from /sys/bus/pci/devices. */
export function pciDevicePath(root: SysRoot, bdf: string): string | undefined {
  return root.link(`/sys/bus/pci/devices/${bdf}`);
}

/**
 * How two devices are connected, in the terms `nvidia-smi topo -m` uses: PIX (one switch), PXB
 * (several switches, no host bridge), PHB (through the host bridge), NODE (between host bridges
 * of one NUMA node), SYS (across the link between sockets).
 */
export type PcieRelation = 'PIX' | 'PXB' | 'PHB' | 'NODE' | 'SYS';

export function relation(a: PciLocation, b: PciLocation): { relation: PcieRelation; bridges: string[] } {
  if (a.hostBridge !== b.hostBridge) {
    const apart = a.numaNode !== undefined && b.numaNode !== undefined && a.numaNode !== b.numaNode;
    return { relation: apart ? 'SYS' : 'NODE', bridges: [...a.chain.slice(0, -1), ...b.chain.slice(0, -1)] };
  }
  let k = 0;
  while (k < a.chain.length && k < b.chain.length && a.chain[k] === b.chain[k]) k++;
  const from = Math.max(0, k - 1);
  const bridges = [...new Set([...a.chain.slice(from, -1), ...b.chain.slice(from, -1)])];
  if (k === 0) return { relation: 'PHB', bridges };
  // Below a switch's upstream port each side has its downstream port and then the device.
  const below = Math.max(a.chain.length - k, b.chain.length - k);
  return { relation: below <= 2 ? 'PIX' : 'PXB', bridges };
}

/** BAR1 size in bytes from the device's `resource` file (its second line), when shown. */
export function bar1Bytes(root: SysRoot, devicePath: string): number | undefined {
  const line = root.text(`${devicePath}/resource`)?.split('\n')[1];
  const m = line && /^\s*0x([0-9a-f]+)\s+0x([0-9a-f]+)/i.exec(line);
  if (!m) return undefined;
  const start = BigInt('0x' + m[1]);
  const end = BigInt('0x' + m[2]);
  return end > start ? Number(end - start + 1n) : undefined;
}

/**
 * ACS on one bridge. `redirect` is what matters for peer-to-peer: with request or completion
 * redirect on, traffic between the GPU and the drive is sent up to the root complex.
 */
export interface AcsState {
  bridge: string;
  state: 'off' | 'redirect' | 'no-capability' | 'unreadable';
  control?: number;
}

const ACS_CAP_ID = 0x000d;
const ACS_REQ_REDIRECT = 0x4;
const ACS_CMPLT_REDIRECT = 0x8;
const ACS_EGRESS_CONTROL = 0x20;

export function acsOf(root: SysRoot, devicePath: string): AcsState {
  const bridge = devicePath.split('/').pop()!;
  const { data } = root.bytes(`${devicePath}/config`);
  // Without privileges the kernel shows only the first 64 bytes of config space; extended
  // capabilities (ACS among them) start at 0x100.
  if (!data || data.length < 0x108) return { bridge, state: 'unreadable' };
  let off = 0x100;
  for (let guard = 0; guard < 64 && off >= 0x100 && off + 8 <= data.length; guard++) {
    const header = data.readUInt32LE(off);
    if (header === 0 || header === 0xffffffff) break;
    if ((header & 0xffff) === ACS_CAP_ID) {
      const control = data.readUInt16LE(off + 6);
      const redirect = (control & (ACS_REQ_REDIRECT | ACS_CMPLT_REDIRECT | ACS_EGRESS_CONTROL)) !== 0;
      return { bridge, state: redirect ? 'redirect' : 'off', control };
    }
    off = (header >>> 20) & 0xffc;
  }
  return { bridge, state: 'no-capability' };
}

/** The directory of a bridge in a location's chain. */
export function bridgePath(loc: PciLocation, bdf: string): string | undefined {
  const i = loc.chain.indexOf(bdf);
  if (i < 0) return undefined;
  const parts = loc.devicePath.split('/');
  return parts.slice(0, parts.length - (loc.chain.length - 1 - i)).join('/');
}
