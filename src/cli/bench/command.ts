/**
 * `penstock bench`: throughput of reads or writes between a file and GPU or host memory, for one
 * or more thread counts and task sizes, each number reported with the route that carried it.
 */
import { constants as bufferConstants } from 'node:buffer';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ArgError, oneOf, parseTarget, parseIntArg, parseIntList, parseSizeArg, parseSizeList } from '../kit/args.js';
import { describeDrop, dropFilePages, type DropResult } from './cold.js';
import { formatCpu, formatGBps, formatSeconds, formatSize, textTable } from '../kit/format.js';
import { describeRoutes, describeStages, measure, type RouteCounts } from './measure.js';
import { ProgressBar } from '../kit/progress.js';
import type { Sample } from './stats.js';
import { fileSystemType, freeBytes, machineInfo } from './system.js';
import { createTestFile, fillDevice, fillRandom } from './testfile.js';
import { configure, getConfig } from '../../engine/process.js';
import { DeviceBuffer } from '../../memory/device-buffer.js';
import { deviceInfo, hasGpu } from '../../addon/runtime.js';
import { open, type PenstockFile } from '../../engine/file.js';
import type { FileRoute } from '../../engine/routing.js';
import { cudaUnavailableReason } from '../../addon/runtime.js';
import { isRemoteUrl } from '../../sources/remote/url.js';
import { EXIT } from '../common.js';
import type { ParsedLine } from '../kit/command.js';
import { onEarlyEnd } from '../kit/process-end.js';
import { terminalJson, terminalText } from '../../vocabulary/terminal-text.js';
import { createPrivateDir, type PrivateDir } from '../private-file.js';

/** The options of `penstock bench`, checked. */
export interface BenchArgs {
  file?: string;
  size?: number;
  /** Host memory (`--host`), else GPU `device` (default 0) where a GPU is usable. */
  host: boolean;
  device?: number;
  op: 'read' | 'write';
  threads?: number[];
  taskSizes?: number[];
  cold: boolean;
  dropCaches: boolean;
  fsync: boolean;
  repeat: number;
  /** `--json`: the results as JSON on stdout (the table and header go to stderr). */
  json: boolean;
  /** `--out FILE`: the results as JSON written to FILE too. */
  out?: string;
  dir?: string;
  progress: boolean;
}

/** Options of the remote benchmark only. */
const URL_ONLY = ['concurrency', 'range-size', 'anonymous'] as const;

/** Checks the command line of `penstock bench FILE`; a bad one throws ArgError. */
export function parseBenchArgs(line: ParsedLine): BenchArgs {
  const { values: v, positionals } = line;
  const str = (name: string) => (typeof v[name] === 'string' ? (v[name] as string) : undefined);
  for (const name of URL_ONLY) if (v[name] !== undefined) throw new ArgError(`--${name} applies to s3://, http:// and https:// URLs only`);
  const target = parseTarget(v);
  const a: BenchArgs = {
    host: target.host,
    op: str('op') === undefined ? 'read' : oneOf(str('op')!, '--op', ['read', 'write'] as const),
    cold: v.cold === true,
    dropCaches: v['drop-caches'] === true,
    fsync: v.fsync === true,
    repeat: str('repeat') === undefined ? 5 : parseIntArg(str('repeat')!, '--repeat', 1, 1000),
    json: v.json === true,
    progress: v['no-progress'] !== true,
  };
  if (target.device !== undefined) a.device = target.device;
  if (positionals[0] !== undefined) a.file = positionals[0];
  if (str('size') !== undefined) a.size = parseSizeArg(str('size')!, '--size');
  if (str('threads') !== undefined) a.threads = parseIntList(str('threads')!, '--threads', 1, 1024);
  if (str('task-size') !== undefined) {
    a.taskSizes = parseSizeList(str('task-size')!, '--task-size');
    const bad = a.taskSizes.find((t) => t % 4096 !== 0);
    if (bad !== undefined) throw new ArgError(`--task-size must be a multiple of 4 KiB, got ${bad} bytes`);
  }
  if (str('out') !== undefined) a.out = str('out')!;
  if (str('dir') !== undefined) a.dir = str('dir')!;
  if (a.cold && a.op === 'write') throw new ArgError('--cold applies to reads only');
  if (a.dropCaches && !a.cold) throw new ArgError('--drop-caches needs --cold');
  if (a.fsync && a.op === 'read') throw new ArgError('--fsync applies to writes only');
  return a;
}

export interface BenchResult {
  threads: number;
  taskSize: number;
  medianGBps?: number;
  minGBps?: number;
  maxGBps?: number;
  cpuSecondsPerGB?: number;
  medianSeconds?: number;
  samples?: Sample[];
  routes?: RouteCounts;
  error?: string;
}

const out = (s: string) => process.stdout.write(s);
const err = (s: string) => process.stderr.write(s);
const DEFAULT_SIZE = 1024 ** 3;

/** Runs `penstock bench`; resolves to the exit status. */
export async function runBenchCli(line: ParsedLine): Promise<number> {
  // s3:// and http(s):// objects have their own benchmark.
  if (line.positionals.some(isRemoteUrl)) return (await import('./remote.js')).runRemoteBenchCli(line);
  const args = parseBenchArgs(line);
  const gpu = hasGpu();
  const target = args.host || (!gpu && args.device === undefined) ? 'host' : 'device';
  if (target === 'device' && !gpu) {
    err(`penstock bench: no GPU: use --host (${terminalText(cudaUnavailableReason() ?? 'no usable GPU')})\n`);
    return EXIT.failure;
  }
  const plan = planFile(args);
  const { file, size, scratch } = plan;
  // Registered as soon as the directory exists, so that a stopped creation leaves nothing either.
  const forget = scratch ? onEarlyEnd(() => scratch.remove()) : undefined;
  try {
    if (target === 'host' && size > bufferConstants.MAX_LENGTH)
      throw new ArgError(`host buffers hold at most ${formatSize(bufferConstants.MAX_LENGTH)} in this Node.js; use a smaller --size`);
    if (plan.fill) await fillTestFile(file, size, args.progress);
    return await runMeasurements(args, target, file, scratch !== undefined, size);
  } finally {
    forget?.();
    scratch?.remove();
  }
}

interface FilePlan {
  file: string;
  size: number;
  /** The private directory of a file this run names itself (removed at the end). */
  scratch?: PrivateDir;
  /** Whether random data must be written before reads. */
  fill: boolean;
}

async function fillTestFile(file: string, size: number, progress: boolean): Promise<void> {
  const bar = new ProgressBar({ label: 'creating test file', total: size, enabled: progress ? undefined : false });
  err(`creating ${formatSize(size)} test file ${terminalText(file)} (random data)\n`);
  try {
    await createTestFile(file, size, { onProgress: bar.update, exclusive: true });
  } finally {
    bar.finish();
  }
}

function planFile(args: BenchArgs): FilePlan {
  if (args.op === 'read' && args.file !== undefined) {
    let st: fs.Stats;
    try {
      st = fs.statSync(args.file);
    } catch (e) {
      throw new ArgError(`cannot read ${args.file}: ${(e as NodeJS.ErrnoException).code ?? String(e)}`);
    }
    if (!st.isFile()) throw new ArgError(`${args.file} is not a regular file`);
    const size = args.size ?? st.size;
    if (size === 0) throw new ArgError(`${args.file} is empty`);
    if (size > st.size) throw new ArgError(`${args.file} holds ${st.size} bytes; --size asks for ${size}`);
    return { file: args.file, size, fill: false };
  }
  const size = args.size ?? DEFAULT_SIZE;
  // Only for an early message: O_EXCL at open is what guarantees nothing is overwritten.
  if (args.file !== undefined && pathTaken(args.file))
    throw new ArgError(`${args.file} exists; --op write only creates new files (remove it or name another)`);
  const dir = args.file !== undefined ? path.dirname(path.resolve(args.file)) : args.dir ?? os.tmpdir();
  if (!fs.existsSync(dir) || !fs.statSync(dir).isDirectory()) throw new ArgError(`${args.dir !== undefined ? '--dir ' : ''}${dir} is not a directory`);
  const free = freeBytes(dir);
  if (free !== undefined && free < size + 64 * 1024 * 1024)
    throw new ArgError(`not enough free space for a ${formatSize(size)} file in ${dir} (${formatSize(free)} free)`);
  // A file the user named is created where named (never over anything already there) and kept;
  // one this run names lives in a private directory that is removed with it.
  if (args.file !== undefined) return { file: args.file, size, fill: false };
  const scratch = createPrivateDir('penstock-bench-', 'data.bin', dir);
  return { file: scratch.path, size, scratch, fill: args.op === 'read' };
}

function pathTaken(file: string): boolean {
  try {
    fs.lstatSync(file);
    return true;
  } catch {
    return false;
  }
}

/** Opens the benchmark's file; a write always creates it (O_EXCL), so nothing existing is overwritten. */
async function openBenchFile(file: string, write: boolean): Promise<PenstockFile> {
  try {
    return await open(file, write ? 'wx' : 'r');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'EEXIST')
      throw new ArgError(`${file} exists; --op write only creates new files (remove it or name another)`);
    throw e;
  }
}

async function runMeasurements(args: BenchArgs, target: 'device' | 'host', file: string, created: boolean, size: number): Promise<number> {
  const write = args.op === 'write';
  // With --json, stdout holds the JSON alone: the readable report goes to stderr.
  const say = args.json ? err : out;
  const drops: DropResult[] = [];
  const dropPolicy = args.dropCaches ? 'drop-caches' : 'auto';
  if (args.cold) {
    const probe = dropFilePages(file, dropPolicy);
    if (!probe.dropped) {
      err(`penstock bench: cannot make ${file} cold: ${describeDrop(probe)}\n`);
      return EXIT.failure;
    }
  }
  const original = getConfig();
  let dev: DeviceBuffer | undefined;
  let host: Buffer | undefined;
  let f: PenstockFile | undefined;
  const results: BenchResult[] = [];
  let route: FileRoute | undefined;
  try {
    // Allocation, and filling a write's source, happen before any timing starts.
    if (target === 'device') {
      dev = DeviceBuffer.alloc(size, { device: args.device ?? 0 });
      if (write) await fillDevice(dev);
    } else {
      host = Buffer.allocUnsafeSlow(size);
      // Touch every page now, or the first timed repeat of a cold read would pay the page faults.
      if (write) fillRandom(host);
      else host.fill(0);
    }
    const memory = (dev ?? host)!;
    f = await openBenchFile(file, write);
    const fd = f.fd;
    const threadsList = args.threads ?? [original.threads];
    const taskList = args.taskSizes ?? [original.taskSize];
    const total = threadsList.length * taskList.length;
    const runsEach = args.repeat + (args.cold ? 0 : 1);
    printHeader(say, args, target, file, created, size);
    let n = 0;
    for (const threads of threadsList)
      for (const taskSize of taskList) {
        n++;
        const label = `threads ${threads}, task ${formatSize(taskSize)}`;
        const result: BenchResult = { threads, taskSize };
        results.push(result);
        let run = 0;
        try {
          configure({ threads, taskSize });
          const m = await measure({
            repeats: args.repeat,
            warmup: !args.cold,
            prepare: args.cold
              ? () => {
                  const d = dropFilePages(file, dropPolicy);
                  drops.push(d);
                  if (!d.dropped) throw new Error(`the file's pages could not be dropped: ${describeDrop(d)}`);
                }
              : undefined,
            settle: write && !args.fsync ? () => fs.fsyncSync(fd) : undefined,
            run: async () => {
              run++;
              const bar = new ProgressBar({ label: `[${n}/${total}] ${label} run ${run}/${runsEach}`, total: size, enabled: args.progress ? undefined : false });
              const opts = { size, ...(args.progress ? { onProgress: bar.update } : {}) };
              try {
                const moved = write ? await f!.write(memory, opts) : await f!.read(memory, opts);
                if (args.fsync) fs.fsyncSync(fd);
                if (moved !== size) throw new Error(`moved ${moved} bytes of ${size}`);
                return moved;
              } finally {
                bar.finish();
              }
            },
          });
          Object.assign(result, {
            medianGBps: m.medianGBps, minGBps: m.minGBps, maxGBps: m.maxGBps, cpuSecondsPerGB: m.cpuSecondsPerGB,
            medianSeconds: m.medianSeconds, samples: m.samples, routes: m.routes,
          });
          err(`[${n}/${total}] ${label}: ${formatGBps(m.medianGBps)} GB/s (${describeRoutes(m.routes)})\n`);
        } catch (e) {
          result.error = (e as Error).message;
          err(`[${n}/${total}] ${label}: failed: ${terminalText(result.error)}\n`);
        }
      }
    if (target === 'device') route = f.route;
  } finally {
    await f?.close();
    dev?.free();
    configure({ threads: original.threads, taskSize: original.taskSize });
  }
  printTable(say, results);
  if (route) say(`device route of this file: ${route.device}${route.reason ? ` (${route.reason.code}: ${terminalText(route.reason.message)})` : ''}\n`);
  if (args.cold && drops.length) say(`cold: pages dropped before each repeat by ${describeDrop(drops[drops.length - 1]!)}\n`);
  if (args.json || args.out !== undefined) {
    const report = {
      tool: 'penstock bench',
      date: new Date().toISOString(),
      machine: machineInfo(),
      gpu: target === 'device' ? deviceInfo(args.device ?? 0) : null,
      file: { path: file, created, size, fileSystem: fileSystemType(path.dirname(path.resolve(file))) },
      target,
      op: args.op,
      state: args.cold ? 'cold' : 'warm',
      coldMethod: args.cold && drops.length ? describeDrop(drops[drops.length - 1]!) : null,
      fsyncTimed: args.fsync,
      repeat: args.repeat,
      settings: original,
      deviceRoute: route ?? null,
      results,
    };
    const text = terminalJson(report) + '\n';
    if (args.out !== undefined) fs.writeFileSync(args.out, text);
    if (args.json) out(text);
  }
  return results.some((r) => r.error !== undefined) ? 1 : 0;
}

function printHeader(say: (s: string) => void, args: BenchArgs, target: string, file: string, created: boolean, size: number): void {
  const what = args.op === 'read' ? `file → ${target} memory` : `${target} memory → file`;
  const state = args.op === 'write' ? (args.fsync ? 'fsync timed' : 'page cache; fsync after each repeat, untimed') : args.cold ? 'cold' : 'warm';
  say(`penstock bench: ${what}, ${formatSize(size)} per transfer, ${state}, ${args.repeat} repeats\n`);
  say(`file: ${terminalText(file)}${created ? ' (created for this run)' : ''} on ${fileSystemType(path.dirname(path.resolve(file)))}\n`);
}

function printTable(say: (s: string) => void, results: BenchResult[]): void {
  const rows = results.map((r) =>
    r.error !== undefined
      ? [String(r.threads), formatSize(r.taskSize), 'failed', '', '', '', '', terminalText(r.error), '']
      : [
          String(r.threads), formatSize(r.taskSize), formatGBps(r.medianGBps), formatGBps(r.minGBps), formatGBps(r.maxGBps),
          formatSeconds(r.medianSeconds), formatCpu(r.cpuSecondsPerGB), describeRoutes(r.routes), describeStages(r.routes),
        ],
  );
  say('\n' + textTable(['threads', 'task', 'GB/s median', 'min', 'max', 'time', 'CPU s/GB', 'route', 'thread time'], rows, ['right', 'right', 'right', 'right', 'right', 'right', 'right', 'left', 'left']));
}
