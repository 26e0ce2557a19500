/**
 * cuFile's configuration file: JSON that allows comments. Only the keys that change which route
 * a file takes, or where the evidence goes, are picked out.
 */
import fs from 'node:fs';
import { parseBooleanWord } from '../vocabulary/reasons.js';
import type { SysRoot } from './sysfs.js';

/**
 * Removes `//` and `/* *\/` comments outside strings. A naive pattern would also cut URLs and
 * paths such as "//mnt/logs" inside string values, so strings are skipped as whole tokens.
 */
export function stripJsonComments(text: string): string {
  let out = '';
  let i = 0;
  while (i < text.length) {
    const c = text[i]!;
    if (c === '"') {
      let j = i + 1;
      while (j < text.length && text[j] !== '"') j += text[j] === '\\' ? 2 : 1;
      out += text.slice(i, j + 1);
      i = j + 1;
    } else if (c === '/' && text[i + 1] === '/') {
      while (i < text.length && text[i] !== '\n') i++;
    } else if (c === '/' && text[i + 1] === '*') {
      const end = text.indexOf('*/', i + 2);
      // Keep line breaks so that JSON.parse positions still point at the right line.
      const body = end < 0 ? text.slice(i) : text.slice(i, end + 2);
      out += body.replace(/[^\n]/g, ' ');
      i = end < 0 ? text.length : end + 2;
    } else {
      out += c;
      i++;
    }
  }
  return out;
}

export interface CuFileConfig {
  /** The file in effect. */
  path: string;
  /** Where the path came from. */
  source: 'CUFILE_ENV_PATH_JSON' | 'default';
  found: boolean;
  /**
   * Set when the path is there but its settings cannot be known: a symbolic link whose target is
   * missing (on a recorded machine root, a target that was not recorded), or a file that cannot
   * be read. The sentence says which; `found` is then false, but cuFile's defaults are not
   * known to apply.
   */
  unknown?: string;
  /** Set when the file exists but is not valid JSON (after comments). */
  error?: string;
  allowCompatMode?: boolean;
  forceCompatMode?: boolean;
  usePciP2pdma?: boolean;
  loggingLevel?: string;
  loggingDir?: string;
  cufileStats?: number;
  /** properties.max_device_pinned_mem_size_kb: how much GPU memory cuFile may pin (through BAR1). */
  maxDevicePinnedKb?: number;
  /** properties.per_buffer_cache_size_kb: the bounce buffer unaligned and unregistered I/O goes through. */
  perBufferCacheKb?: number;
  /** properties.max_direct_io_size_kb: the largest piece cuFile sends down at once. */
  maxDirectIoKb?: number;
  /** properties.rdma_dev_addr_list: the NICs distributed file systems may use for RDMA. */
  rdmaDevAddrList?: string[];
  /** fs.generic.posix_unaligned_writes: unaligned writes through POSIX. */
  posixUnalignedWrites?: boolean;
  /** fs.<name>.posix_gds_min_kb: I/O below this size goes through POSIX on that file system. */
  posixGdsMinKb: Record<string, number>;
  /** denylist.*: drivers, devices, mount points and file systems cuFile must not use directly. */
  denylist: { drivers: string[]; devices: string[]; mounts: string[]; filesystems: string[] };
  /** execution.max_io_threads and execution.parallel_io. */
  maxIoThreads?: number;
  parallelIo?: boolean;
  /** The whole parsed file (comments removed), when it parsed. */
  json?: unknown;
}

function pick(obj: unknown, ...keys: string[]): unknown {
  let cur = obj;
  for (const k of keys) {
    if (cur === null || typeof cur !== 'object') return undefined;
    cur = (cur as Record<string, unknown>)[k];
  }
  return cur;
}

const bool = (v: unknown) => (typeof v === 'boolean' ? v : undefined);
const str = (v: unknown) => (typeof v === 'string' ? v : undefined);
const num = (v: unknown) => (typeof v === 'number' ? v : undefined);
const strings = (v: unknown) => (Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : []);

export function readCuFileConfig(root: SysRoot, env: NodeJS.ProcessEnv): CuFileConfig {
  const override = env.CUFILE_ENV_PATH_JSON;
  const file = override ? override : '/etc/cufile.json';
  const cfg: CuFileConfig = {
    path: file, source: override ? 'CUFILE_ENV_PATH_JSON' : 'default', found: false,
    posixGdsMinKb: {}, denylist: { drivers: [], devices: [], mounts: [], filesystems: [] },
  };
  const text = root.text(file);
  if (text === undefined) {
    const why = whyUnread(root, file);
    if (why) cfg.unknown = why;
    return cfg;
  }
  cfg.found = true;
  let json: unknown;
  try {
    json = JSON.parse(stripJsonComments(text));
  } catch (err) {
    cfg.error = (err as Error).message;
    return cfg;
  }
  cfg.allowCompatMode = bool(pick(json, 'properties', 'allow_compat_mode'));
  cfg.forceCompatMode = bool(pick(json, 'properties', 'force_compat_mode'));
  cfg.usePciP2pdma = bool(pick(json, 'properties', 'use_pci_p2pdma'));
  cfg.loggingLevel = str(pick(json, 'logging', 'level'));
  cfg.loggingDir = str(pick(json, 'logging', 'dir'));
  cfg.cufileStats = num(pick(json, 'profile', 'cufile_stats'));
  cfg.json = json;
  const set = <K extends keyof CuFileConfig>(k: K, v: CuFileConfig[K] | undefined) => {
    if (v !== undefined) cfg[k] = v;
  };
  set('maxDevicePinnedKb', num(pick(json, 'properties', 'max_device_pinned_mem_size_kb')));
  set('perBufferCacheKb', num(pick(json, 'properties', 'per_buffer_cache_size_kb')));
  set('maxDirectIoKb', num(pick(json, 'properties', 'max_direct_io_size_kb')));
  const rdma = pick(json, 'properties', 'rdma_dev_addr_list');
  if (Array.isArray(rdma)) cfg.rdmaDevAddrList = strings(rdma);
  set('posixUnalignedWrites', bool(pick(json, 'fs', 'generic', 'posix_unaligned_writes')));
  const fsSection = pick(json, 'fs');
  if (fsSection && typeof fsSection === 'object')
    for (const [name, v] of Object.entries(fsSection as Record<string, unknown>)) {
      const min = num(pick(v, 'posix_gds_min_kb'));
      if (min !== undefined) cfg.posixGdsMinKb[name] = min;
    }
  for (const k of ['drivers', 'devices', 'mounts', 'filesystems'] as const) cfg.denylist[k] = strings(pick(json, 'denylist', k));
  set('maxIoThreads', num(pick(json, 'execution', 'max_io_threads')));
  set('parallelIo', bool(pick(json, 'execution', 'parallel_io')));
  return cfg;
}

/** Why a path that is there could not be read (a dangling link, an unreadable file); undefined when it is simply absent. */
function whyUnread(root: SysRoot, file: string): string | undefined {
  if (!root.exists(file)) return undefined;
  let target: string | undefined;
  try {
    const host = root.hostPath(file, true);
    if (fs.lstatSync(host).isSymbolicLink()) target = fs.readlinkSync(host);
  } catch {
    // Gone between the two looks: read as absent.
    return undefined;
  }
  if (target === undefined) return `${file} cannot be read`;
  return root.live ? `${file} is a symbolic link to ${target}, which does not exist` : `${file} is a symbolic link to ${target}, which the recorded machine root does not hold`;
}

/** A cuFile boolean environment variable: undefined when unset or not a boolean. */
export function envFlag(env: NodeJS.ProcessEnv, name: string): boolean | undefined {
  const v = env[name];
  return v === undefined || v === '' ? undefined : parseBooleanWord(v);
}
