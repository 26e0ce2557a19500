/** Facts about the machine that benchmark reports state next to their numbers. */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import { gbps } from './stats.js';

const FS_TYPES: Record<number, string> = {
  0xef53: 'ext2/3/4',
  0x01021994: 'tmpfs',
  0x58465342: 'xfs',
  0x9123683e: 'btrfs',
  0x6969: 'nfs',
  0x794c7630: 'overlayfs',
  0x65735546: 'fuse',
  0x2fc12fc1: 'zfs',
  0xff534d42: 'cifs',
  0x5346544e: 'ntfs',
};

/** The file system holding `path`, by name where known. */
export function fileSystemType(path: string): string {
  try {
    const t = fs.statfsSync(path).type;
    return FS_TYPES[t] ?? `0x${t.toString(16)}`;
  } catch {
    return 'unknown';
  }
}

/** Free bytes for an unprivileged writer on the file system holding `dir`. */
export function freeBytes(dir: string): number | undefined {
  try {
    const s = fs.statfsSync(dir);
    return s.bavail * s.bsize;
  } catch {
    return undefined;
  }
}

export interface MachineInfo {
  node: string;
  platform: string;
  kernel: string;
  cpus: number;
  cpuModel: string;
  memoryBytes: number;
  /** libuv's pool size, which bounds how many fs calls Node runs at once. */
  uvThreadpoolSize: string;
  root: boolean;
}

export function machineInfo(): MachineInfo {
  const cpus = os.cpus();
  return {
    node: process.version,
    platform: `${process.platform}-${process.arch}`,
    kernel: os.release(),
    cpus: typeof os.availableParallelism === 'function' ? os.availableParallelism() : cpus.length,
    cpuModel: cpus[0]?.model.trim() ?? 'unknown',
    memoryBytes: os.totalmem(),
    uvThreadpoolSize: process.env.UV_THREADPOOL_SIZE ? process.env.UV_THREADPOOL_SIZE : '4 (default)',
    root: typeof process.getuid === 'function' && process.getuid() === 0,
  };
}

export interface DdResult {
  command: string;
  bytes: number;
  seconds: number;
  gbps: number;
}

/** Parses GNU dd's closing line: "1073741824 bytes (1.1 GB, 1.0 GiB) copied, 0.71 s, 1.5 GB/s". */
export function parseDdOutput(text: string): { bytes: number; seconds: number } | undefined {
  const m = /(\d+) bytes\b[^\n]*?copied, ([\d.]+(?:e[-+]?\d+)?) s/.exec(text);
  if (!m) return undefined;
  return { bytes: Number(m[1]), seconds: Number(m[2]) };
}

/**
 * Reads `file` with O_DIRECT through dd: the disk's own sequential rate, with no page cache in
 * the way, which is the bound for a cold read.
 */
export function ddDirectRead(file: string, blockSize = '16M'): DdResult {
  const args = [`if=${file}`, 'of=/dev/null', `bs=${blockSize}`, 'iflag=direct'];
  const command = `dd ${args.join(' ')}`;
  const r = spawnSync('dd', args, { encoding: 'utf8', env: { ...process.env, LC_ALL: 'C' } });
  if (r.error) throw new Error(`${command} could not run: ${r.error.message}`);
  if (r.status !== 0) throw new Error(`${command} failed: ${r.stderr.trim().split('\n').pop() ?? `exit ${r.status}`}`);
  const parsed = parseDdOutput(r.stderr);
  if (!parsed) throw new Error(`${command}: could not read its rate from: ${r.stderr.trim()}`);
  return { command, ...parsed, gbps: gbps(parsed.bytes, parsed.seconds) };
}

/**
 * CPU seconds (user + system) the main thread of this process has used, from
 * /proc/self/task/PID/stat (the main thread's id is the process id), in clock ticks of 1/100 s;
 * undefined where there is no such file. `process.cpuUsage()` counts every thread together.
 */
export function mainThreadCpuSeconds(): number | undefined {
  try {
    const stat = fs.readFileSync(`/proc/self/task/${process.pid}/stat`, 'utf8');
    // Fields after the command name (which may hold spaces, so it is skipped by its closing paren).
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return undefined;
  }
}
