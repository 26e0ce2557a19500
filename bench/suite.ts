/**
 * `npm run bench`: penstock against the plain Node ways, on the same files, with the machine's
 * own limits measured in the same run. Writes bench-results/results.json (after every step),
 * table.md and throughput.svg, and ends with the targets, each marked pass or miss.
 */
import { spawn } from 'node:child_process';
import { constants as bufferConstants } from 'node:buffer';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ArgError, parseCommandLine, parseIntArg, parseSizeArg } from '../src/cli/kit/args.js';
import { formatSize } from '../src/cli/kit/format.js';
import { fileSystemType, freeBytes, machineInfo } from '../src/cli/bench/system.js';
import { createTestFile } from '../src/cli/bench/testfile.js';
import { configure, deviceInfo, getConfig, hasGpu } from '../src/index.js';
import { runtimeInfo } from '../src/doctor.js';
import { cudaUnavailableReason } from '../src/addon/runtime.js';
import { Suite, type SuiteOptions, type SuiteReport } from './context.js';
import { Buffers } from './methods.js';
import { firstRead, latency, limits, memory, warmFile } from './probes.js';
import { annotateLimits, computeTargets, renderMarkdown, renderSvg, targetsText } from './report.js';
import { batchedReads, splitSweep } from './size-sections.js';
import { coldReads, deviceReads, hostReads, taskSweep, threadSweep, writes, type Env } from './sections.js';

const KiB = 1024;
const MiB = KiB * KiB;
const GiB = MiB * KiB;
const SECTIONS = ['limits', 'device', 'host', 'threads', 'tasks', 'split', 'latency', 'batch', 'first', 'memory', 'write', 'cold'] as const;

const USAGE = `Usage: npm run bench -- [options]

  --out DIR            results folder (default bench-results)
  --dir DIR            where the test files go (default: the temporary directory)
  --max-size SIZE      largest transfer (default 4GiB with a GPU, 512MiB without)
  --quick              fewer sizes, threads and task sizes, 2 repeats
  --repeat N           timed repeats per configuration (default 3)
  --latency-iterations N   reads per latency measurement (default 2000; --quick 1000)
  --only LIST          run only these sections: ${SECTIONS.join(',')}
  --keep-files         keep the test files (a later run reuses files of the right size)
  --uv-threads N       UV_THREADPOOL_SIZE for the run when it is not set (default 16)
`;

function parseOptions(argv: string[]): SuiteOptions & { help: boolean; uvThreads: number; maxSizeGiven: boolean } {
  const { values: v } = parseCommandLine({
    args: argv,
    strict: true,
    options: {
      out: { type: 'string', default: 'bench-results' },
      dir: { type: 'string', default: os.tmpdir() },
      'max-size': { type: 'string' },
      quick: { type: 'boolean', default: false },
      repeat: { type: 'string' },
      'latency-iterations': { type: 'string' },
      only: { type: 'string' },
      'keep-files': { type: 'boolean', default: false },
      'uv-threads': { type: 'string', default: '16' },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  const quick = v.quick === true;
  let only: Set<string> | undefined;
  if (v.only !== undefined) {
    only = new Set(v.only.split(',').map((s) => s.trim()));
    const bad = [...only].filter((s) => !(SECTIONS as readonly string[]).includes(s));
    if (bad.length) throw new ArgError(`--only: unknown section ${bad.join(', ')} (known: ${SECTIONS.join(', ')})`);
  }
  return {
    out: v.out!,
    dir: v.dir!,
    maxSize: v['max-size'] === undefined ? 0 : parseSizeArg(v['max-size'], '--max-size', 4 * KiB),
    maxSizeGiven: v['max-size'] !== undefined,
    quick,
    repeat: v.repeat === undefined ? (quick ? 2 : 3) : parseIntArg(v.repeat, '--repeat', 1, 100),
    latencyIterations: v['latency-iterations'] === undefined ? (quick ? 1000 : 2000) : parseIntArg(v['latency-iterations'], '--latency-iterations', 10, 1e6),
    keepFiles: v['keep-files'] === true,
    only,
    uvThreads: parseIntArg(v['uv-threads']!, '--uv-threads', 1, 1024),
    help: v.help === true,
  };
}

/** 4 KiB to 4 GiB in steps of 16×, cut at the largest, which is included (except in a quick run). */
export function sizeList(maxSize: number, quick: boolean): number[] {
  const all = quick ? [4 * KiB, MiB, 64 * MiB, GiB] : [4 * KiB, 64 * KiB, MiB, 16 * MiB, 256 * MiB, GiB, 4 * GiB];
  const sizes = all.filter((s) => s <= maxSize);
  if (!quick && !sizes.includes(maxSize)) sizes.push(maxSize);
  return sizes;
}

async function prepareFiles(suite: Suite, sizes: number[], dir: string, created: string[]): Promise<Map<number, string>> {
  const files = new Map<number, string>();
  const need = sizes.reduce((a, b) => a + b, 0) + Math.min(GiB, Math.max(...sizes)) + 256 * MiB;
  const free = freeBytes(dir);
  if (free !== undefined && free < need) throw new Error(`${dir} has ${formatSize(free)} free; the test files need about ${formatSize(need)} (use --dir or --max-size)`);
  for (const size of sizes) {
    const file = path.join(dir, `penstock-suite-${size}.dat`);
    files.set(size, file);
    if (fs.existsSync(file) && fs.statSync(file).size === size) {
      suite.log(`reusing test file ${file}`);
      continue;
    }
    suite.log(`creating ${formatSize(size)} test file ${file}`);
    created.push(file);
    await createTestFile(file, size);
  }
  return files;
}

async function respawn(uvThreads: number): Promise<number> {
  const script = fileURLToPath(import.meta.url);
  const env = { ...process.env, UV_THREADPOOL_SIZE: String(uvThreads) };
  const child = spawn(process.execPath, [...process.execArgv, script, ...process.argv.slice(2)], { stdio: 'inherit', env });
  // Ctrl-C reaches the child too; this process only waits for it to clean up.
  const ignore = () => {};
  process.on('SIGINT', ignore);
  return new Promise((resolve) => child.on('exit', (code, signal) => resolve(code ?? (signal ? 128 + (os.constants.signals[signal] ?? 0) : 1))));
}

async function main(argv: string[]): Promise<number> {
  let o: ReturnType<typeof parseOptions>;
  try {
    o = parseOptions(argv);
  } catch (err) {
    if (!(err instanceof ArgError)) throw err;
    process.stderr.write(`bench: ${err.message}\n\n${USAGE}`);
    return 2;
  }
  if (o.help) {
    process.stdout.write(USAGE);
    return 0;
  }
  // libuv sizes its pool on first use, before any script code could change it: hence a new process.
  if (!process.env.UV_THREADPOOL_SIZE) return respawn(o.uvThreads);
  const gpu = hasGpu();
  const gpuReason = gpu ? '' : (cudaUnavailableReason() ?? 'no usable GPU');
  if (!o.maxSizeGiven) o.maxSize = gpu ? 4 * GiB : 512 * MiB;
  if (o.maxSize > bufferConstants.MAX_LENGTH) o.maxSize = bufferConstants.MAX_LENGTH;
  const sizes = sizeList(o.maxSize, o.quick);
  const sweepSize = Math.min(GiB, o.maxSize);
  if (!sizes.includes(sweepSize)) sizes.push(sweepSize), sizes.sort((a, b) => a - b);
  fs.mkdirSync(o.dir, { recursive: true });
  const defaults = getConfig();
  const report: SuiteReport = {
    tool: 'penstock benchmark suite',
    started: new Date().toISOString(),
    machine: { ...machineInfo(), gpu: gpu ? deviceInfo(0) : null, fileSystem: fileSystemType(o.dir), dir: o.dir, ...(gpu ? {} : { gpuSkipReason: gpuReason }) },
    settings: { ...defaults, runtime: runtimeInfo() },
    options: { out: o.out, dir: o.dir, maxSize: o.maxSize, quick: o.quick, repeat: o.repeat, keepFiles: o.keepFiles, latencyIterations: o.latencyIterations, ...(o.only ? { only: [...o.only] } : {}) },
    limits: [], results: [], latency: [], skipped: [], targets: [],
    notes: [
      'penstock and FileHandle methods open the file once before timing; fs.readFile and fs.writeFile open it inside every call, as they must.',
      'Every method reads into (or writes from) memory allocated before timing, except fs.readFile, which allocates its own Buffer.',
      'Transfers under 256 MiB repeat within each timed repeat (up to 256 times) to rise above timer noise.',
    ],
  };
  const suite = new Suite(o, report);
  suite.setRenderer((r) => ({ markdown: renderMarkdown(r), svg: renderSvg(r) }));
  suite.log(`penstock benchmark suite: sizes ${sizes.map(formatSize).join(', ')}; ${o.repeat} repeats; GPU: ${gpu ? 'yes' : `no (${gpuReason})`}; UV_THREADPOOL_SIZE=${process.env.UV_THREADPOOL_SIZE}; results in ${o.out}/`);
  const created: string[] = [];
  const buffers = new Buffers(o.maxSize);
  const scratch = path.join(o.dir, `penstock-suite-write-${process.pid}.dat`);
  const removeFiles = () => {
    if (!o.keepFiles) for (const f of created) fs.rmSync(f, { force: true });
    fs.rmSync(scratch, { force: true });
  };
  // Gigabytes of test files must not outlive an interrupted run; what was measured is kept.
  process.once('SIGINT', () => {
    removeFiles();
    report.notes.push('Interrupted before the end.');
    suite.flush();
    process.exit(130);
  });
  try {
    const files = await prepareFiles(suite, sizes, o.dir, created);
    const env: Env = {
      suite, gpu, gpuReason, files, buffers, sizes, sweepSize, outFile: scratch,
      defaults: { threads: defaults.threads, taskSize: defaults.taskSize },
      threadsList: o.quick ? [1, 4, 16] : [1, 2, 4, 8, 16],
      taskSizes: (o.quick ? [1, 4, 16] : [1, 2, 4, 8, 16]).map((m) => m * MiB),
    };
    const steps: [string, () => Promise<void>][] = [
      ['limits', async () => (await warmFile(env, files.get(sweepSize)!, sweepSize), limits(env))],
      ['device', () => deviceReads(env)],
      ['host', () => hostReads(env)],
      ['threads', () => threadSweep(env)],
      ['tasks', () => taskSweep(env)],
      ['split', () => splitSweep(env)],
      ['latency', () => latency(env)],
      ['batch', () => batchedReads(env)],
      ['first', () => firstRead(env)],
      ['memory', () => memory(env)],
      ['write', () => writes(env)],
      ['cold', () => coldReads(env)],
    ];
    for (const [name, step] of steps) {
      if (!suite.wants(name)) continue;
      try {
        await step();
      } catch (err) {
        suite.skip(`section ${name}`, `failed: ${(err as Error).stack ?? String(err)}`);
      }
      annotateLimits(report);
      suite.flush();
    }
  } finally {
    configure({ threads: defaults.threads, taskSize: defaults.taskSize });
    buffers.free();
    removeFiles();
  }
  annotateLimits(report);
  report.targets = computeTargets(report, sweepSize);
  report.finished = new Date().toISOString();
  report.durationSeconds = suite.elapsedSeconds();
  suite.flush();
  process.stdout.write(`\nTargets (this run's numbers${gpu ? '' : '; no GPU here, so the device targets are not measured'}):\n\n${targetsText(report.targets)}`);
  process.stdout.write(`\nWrote ${path.join(o.out, 'results.json')}, table.md and throughput.svg (${report.durationSeconds.toFixed(0)} s).\n`);
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(`bench: ${(err as Error).stack ?? String(err)}\n`);
    process.exitCode = 1;
  },
);
