/**
 * `penstock bench`: throughput of reads or writes between a file and GPU or host memory, for one
 * or more thread counts and task sizes, each number reported with the route that carried it.
 */
import { constants as bufferConstants } from 'node:buffer';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ArgError, oneOf, parseCommandLine, parseIntArg, parseIntList, parseSizeArg, parseSizeList } from '../kit/args.js';
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
import { EXIT, EXIT_HELP } from '../common.js';
import { createPrivateDir, type PrivateDir } from '../private-file.js';

/** `penstock bench --help`. */
export const BENCH_USAGE = `Usage: penstock bench [FILE] [options]

Measures reads (or writes) between FILE and GPU or host memory. Without FILE a
file of random data is created for the run in a private temporary directory
(under --dir, or the system's) and removed afterwards.

Options:
  --size SIZE       bytes per transfer (default: FILE's size, or 1GiB)
  --target T        device | host (default: device where a GPU is usable)
  --op OP           read | write (default read); write creates FILE and never
                    overwrites anything already there
  --threads LIST    I/O threads, each value its own run: 1,4,16
  --task-size LIST  bytes per task, each value its own run: 4MiB or 1MiB,16MiB
  --cold            drop FILE's pages from the page cache before every repeat
  --drop-caches     with --cold: also drop the whole page cache (needs root)
  --fsync           writes: include fsync in the timed region
  --repeat N        timed repeats per configuration (default 5)
  --json OUT        also write the results as JSON to OUT
  --dir DIR         where to create the test file
  --no-progress     no progress bars (drawn only on a terminal anyway)
  -h, --help        this text

Throughput is in GB/s (1 GB = 1e9 bytes): median, min and max over the
repeats. CPU is the process's user+system seconds per GB moved. Warm runs
start with one untimed transfer.

${EXIT_HELP}`;

export interface BenchArgs {
  file?: string;
  size?: number;
  target?: 'device' | 'host';
  op: 'read' | 'write';
  threads?: number[];
  taskSizes?: number[];
  cold: boolean;
  dropCaches: boolean;
  fsync: boolean;
  repeat: number;
  json?: string;
  dir?: string;
  progress: boolean;
  help: boolean;
}

export function parseBenchArgs(argv: string[]): BenchArgs {
  const { values: v, positionals } = parseCommandLine({
    args: argv,
    allowPositionals: true,
    strict: true,
    options: {
      size: { type: 'string' },
      target: { type: 'string' },
      op: { type: 'string' },
      threads: { type: 'string' },
      'task-size': { type: 'string' },
      cold: { type: 'boolean', default: false },
      'drop-caches': { type: 'boolean', default: false },
      fsync: { type: 'boolean', default: false },
      repeat: { type: 'string' },
      json: { type: 'string' },
      dir: { type: 'string' },
      'no-progress': { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  if (positionals.length > 1) throw new ArgError(`expected at most one FILE, got ${positionals.length}: ${positionals.join(' ')}`);
  const a: BenchArgs = {
    op: v.op === undefined ? 'read' : oneOf(v.op, '--op', ['read', 'write'] as const),
    cold: v.cold === true,
    dropCaches: v['drop-caches'] === true,
    fsync: v.fsync === true,
    repeat: v.repeat === undefined ? 5 : parseIntArg(v.repeat, '--repeat', 1, 1000),
    progress: v['no-progress'] !== true,
    help: v.help === true,
  };
  if (positionals[0] !== undefined) a.file = positionals[0];
  if (v.size !== undefined) a.size = parseSizeArg(v.size, '--size');
  if (v.target !== undefined) a.target = oneOf(v.target, '--target', ['device', 'host'] as const);
  if (v.threads !== undefined) a.threads = parseIntList(v.threads, '--threads', 1, 1024);
  if (v['task-size'] !== undefined) {
    a.taskSizes = parseSizeList(v['task-size'], '--task-size');
    const bad = a.taskSizes.find((t) => t % 4096 !== 0);
    if (bad !== undefined) throw new ArgError(`--task-size must be a multiple of 4 KiB, got ${bad} bytes`);
  }
  if (v.json !== undefined) a.json = v.json;
  if (v.dir !== undefined) a.dir = v.dir;
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
export async function runBenchCli(argv: string[]): Promise<number> {
  // s3:// and http(s):// objects have their own benchmark.
  if (argv.some(isRemoteUrl)) return (await import('./remote.js')).runRemoteBenchCli(argv);
  let args: BenchArgs;
  try {
    args = parseBenchArgs(argv);
  } catch (e) {
    if (!(e instanceof ArgError)) throw e;
    err(`penstock bench: ${e.message}\nRun "penstock bench --help" for the options.\n`);
    return EXIT.usage;
  }
  if (args.help) {
    out(BENCH_USAGE);
    return EXIT.ok;
  }
  const gpu = hasGpu();
  const target = args.target ?? (gpu ? 'device' : 'host');
  if (target === 'device' && !gpu) {
    err(`penstock bench: no GPU: use --target host (${cudaUnavailableReason() ?? 'no usable GPU'})\n`);
    return EXIT.failure;
  }
  let plan: FilePlan;
  try {
    plan = planFile(args);
  } catch (e) {
    if (!(e instanceof ArgError)) throw e;
    err(`penstock bench: ${e.message}\n`);
    return EXIT.usage;
  }
  const { file, size, scratch } = plan;
  const created = scratch !== undefined;
  if (target === 'host' && size > bufferConstants.MAX_LENGTH) {
    scratch?.remove();
    err(`penstock bench: host buffers hold at most ${formatSize(bufferConstants.MAX_LENGTH)} in this Node.js; use a smaller --size\n`);
    return EXIT.usage;
  }
  const removeCreated = () => scratch?.remove();
  // Installed before the file exists, so an interrupted creation leaves nothing behind either.
  const onSignal = () => {
    removeCreated();
    process.exit(130);
  };
  process.once('SIGINT', onSignal);
  try {
    if (plan.fill) await fillTestFile(file, size, args.progress);
    return await runMeasurements(args, target, file, created, size);
  } catch (e) {
    if (!(e instanceof ArgError)) throw e;
    err(`penstock bench: ${e.message}\n`);
    return EXIT.usage;
  } finally {
    process.removeListener('SIGINT', onSignal);
    removeCreated();
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
  err(`creating ${formatSize(size)} test file ${file} (random data)\n`);
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
      dev = DeviceBuffer.alloc(size);
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
    printHeader(args, target, file, created, size);
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
          err(`[${n}/${total}] ${label}: failed: ${result.error}\n`);
        }
      }
    if (target === 'device') route = f.route;
  } finally {
    await f?.close();
    dev?.free();
    configure({ threads: original.threads, taskSize: original.taskSize });
  }
  printTable(results);
  if (route) out(`device route of this file: ${route.device}${route.reason ? ` (${route.reason.code}: ${route.reason.message})` : ''}\n`);
  if (args.cold && drops.length) out(`cold: pages dropped before each repeat by ${describeDrop(drops[drops.length - 1]!)}\n`);
  if (args.json) {
    const report = {
      tool: 'penstock bench',
      date: new Date().toISOString(),
      machine: machineInfo(),
      gpu: target === 'device' ? deviceInfo(0) : null,
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
    fs.writeFileSync(args.json, JSON.stringify(report, null, 2) + '\n');
  }
  return results.some((r) => r.error !== undefined) ? 1 : 0;
}

function printHeader(args: BenchArgs, target: string, file: string, created: boolean, size: number): void {
  const what = args.op === 'read' ? `file → ${target} memory` : `${target} memory → file`;
  const state = args.op === 'write' ? (args.fsync ? 'fsync timed' : 'page cache; fsync after each repeat, untimed') : args.cold ? 'cold' : 'warm';
  out(`penstock bench: ${what}, ${formatSize(size)} per transfer, ${state}, ${args.repeat} repeats\n`);
  out(`file: ${file}${created ? ' (created for this run)' : ''} on ${fileSystemType(path.dirname(path.resolve(file)))}\n`);
}

function printTable(results: BenchResult[]): void {
  const rows = results.map((r) =>
    r.error !== undefined
      ? [String(r.threads), formatSize(r.taskSize), 'failed', '', '', '', '', r.error, '']
      : [
          String(r.threads), formatSize(r.taskSize), formatGBps(r.medianGBps), formatGBps(r.minGBps), formatGBps(r.maxGBps),
          formatSeconds(r.medianSeconds), formatCpu(r.cpuSecondsPerGB), describeRoutes(r.routes), describeStages(r.routes),
        ],
  );
  out('\n' + textTable(['threads', 'task', 'GB/s median', 'min', 'max', 'time', 'CPU s/GB', 'route', 'thread time'], rows, ['right', 'right', 'right', 'right', 'right', 'right', 'right', 'left', 'left']));
}
