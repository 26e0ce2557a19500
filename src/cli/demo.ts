/**
 * `penstock demo` (what `npm start` runs): creates a sample file, reads it into GPU memory (host
 * memory where there is no GPU or with --host), verifies it byte for byte, and prints the route,
 * bytes, seconds and GB/s.
 */
import { constants as bufferConstants } from 'node:buffer';
import crypto from 'node:crypto';
import fs from 'node:fs';
import { ArgError, parseCommandLine, parseSizeArg } from './kit/args.js';
import { ProgressBar } from './kit/progress.js';
import { DeviceBuffer } from '../memory/device-buffer.js';
import { open, type PenstockFile } from '../engine/file.js';
import { hasGpu } from '../addon/runtime.js';
import { formatSize } from '../settings/sizes.js';
import { getConfig, runtimeInfo } from '../engine/process.js';
import { ROUTES, type StatsSnapshot } from '../engine/stats.js';
import { EXIT, EXIT_HELP, painter, runCommand } from './common.js';
import { createPrivateFile, type PrivateFile } from './private-file.js';

/** `penstock demo --help`. */
export const DEMO_USAGE = `Usage: penstock demo [--size SIZE] [--file PATH] [--host]

Reads a file into GPU memory (host memory without a GPU), checks every byte
against the file's sha256 and shows the route the data took. Without --file a
sample file of random data is created in a private temporary directory and
removed afterwards.

Options:
  --size SIZE     size of the sample file (default 256MiB; any size, 3GiB too)
  --file PATH     read this file instead (it is never modified)
  --host          read into host memory even where a GPU is usable
  --no-progress   no progress bars (they are drawn only on a terminal anyway)
  -h, --help      this text

${EXIT_HELP}`;

const CHUNK = 8 << 20;
// Device memory is hashed through a host buffer of this size, copied out piece by piece.
const HASH_PIECE = 64 << 20;

/** Runs `penstock demo`; resolves to the exit status. */
export function runDemo(argv: string[]): Promise<number> {
  return runCommand('demo', () => demo(argv));
}

async function demo(argv: string[]): Promise<number> {
  const { values } = parseCommandLine({
    args: argv,
    strict: true,
    options: {
      size: { type: 'string' },
      file: { type: 'string' },
      host: { type: 'boolean', default: false },
      'no-progress': { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  if (values.help) {
    process.stdout.write(DEMO_USAGE);
    return EXIT.ok;
  }
  if (values.file !== undefined && values.size !== undefined) throw new ArgError('--size applies to the sample file; it cannot be used with --file');
  const progress = !values['no-progress'];
  const out = (s: string) => process.stdout.write(s + '\n');
  const paint = painter(process.stdout);
  const gpu = !values.host && hasGpu();
  let sample: PrivateFile | undefined;
  try {
    let file: string;
    let expected: string;
    if (values.file === undefined) {
      const size = parseSizeArg(values.size ?? '256MiB', '--size');
      checkHostSize(size, gpu);
      sample = createPrivateFile('penstock-demo-', 'sample.bin');
      file = sample.path;
      out(`Creating a ${formatSize(size)} sample file: ${file}`);
      expected = writeSample(sample.fd, size, progress);
      sample.closeFd();
    } else {
      file = values.file;
      const st = statInput(file);
      checkHostSize(st.size, gpu);
      expected = hashFile(file, st.size, progress);
    }
    const fileSize = fs.statSync(file).size;
    if (!gpu) {
      const rt = runtimeInfo();
      out(values.host ? 'Target: host memory (--host)' : `Target: host memory (no usable GPU here: ${rt.cuda.error ?? rt.cuda.initError?.code ?? 'no device'})`);
    } else out('Target: GPU 0 memory');
    const f = await open(file, 'r');
    let result: { seconds: number; stats: StatsSnapshot; hash: string };
    try {
      result = await timedRead(f, fileSize, gpu ? DeviceBuffer.alloc(fileSize) : Buffer.allocUnsafeSlow(fileSize), progress);
      printRoute(out, f, result.stats, gpu);
    } finally {
      await f.close();
    }
    const ok = result.hash === expected;
    out(`Verified: ${ok ? paint('32', 'yes, sha256 matches the file') : paint('31', 'NO — the data differs from the file')} (${expected.slice(0, 16)}…)`);
    const { seconds } = result;
    out(`Bytes: ${fileSize}  Seconds: ${seconds.toFixed(4)}  Throughput: ${(fileSize / seconds / 1e9).toFixed(2)} GB/s (warm, threads ${getConfig().threads}, task size ${formatSize(getConfig().taskSize)})`);
    return ok ? EXIT.ok : EXIT.failure;
  } finally {
    sample?.remove();
  }
}

function statInput(file: string): fs.Stats {
  let st: fs.Stats;
  try {
    st = fs.statSync(file);
  } catch (e) {
    throw new ArgError(`cannot read ${file}: ${(e as NodeJS.ErrnoException).code ?? String(e)}`);
  }
  if (!st.isFile()) throw new ArgError(`${file} is not a regular file`);
  if (st.size === 0) throw new ArgError(`${file} is empty`);
  return st;
}

function checkHostSize(size: number, gpu: boolean): void {
  if (!gpu && size > bufferConstants.MAX_LENGTH)
    throw new ArgError(`host memory buffers hold at most ${formatSize(bufferConstants.MAX_LENGTH)} in this Node.js; use a smaller size`);
}

/** Reads the whole file once to warm it, then times a second read and hashes what arrived. */
async function timedRead(f: PenstockFile, size: number, target: DeviceBuffer | Buffer, progress: boolean) {
  try {
    await withBar('warming the page cache', size, progress, (onProgress) => f.read(target, { onProgress }));
    f.resetStats();
    const t0 = process.hrtime.bigint();
    const n = await f.read(target);
    const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
    if (n !== size) throw new Error(`short read: ${n} of ${size} bytes`);
    const stats = f.stats();
    const hash = await withBar('verifying', size, progress, (onProgress) => hashMemory(target, size, onProgress));
    return { seconds, stats, hash };
  } finally {
    if (target instanceof DeviceBuffer) target.free();
  }
}

async function withBar<T>(label: string, total: number, progress: boolean, fn: (onProgress: (done: number) => void) => Promise<T>): Promise<T> {
  const bar = new ProgressBar({ label, total, enabled: progress });
  try {
    return await fn(bar.update);
  } finally {
    bar.finish();
  }
}

/** sha256 of memory, in pieces: a device buffer is copied out a chunk at a time. */
async function hashMemory(target: DeviceBuffer | Buffer, size: number, onProgress: (done: number) => void): Promise<string> {
  const hash = crypto.createHash('sha256');
  const chunk = target instanceof DeviceBuffer ? Buffer.allocUnsafeSlow(Math.min(size, HASH_PIECE)) : undefined;
  for (let off = 0; off < size; off += HASH_PIECE) {
    const n = Math.min(HASH_PIECE, size - off);
    if (chunk) {
      await (target as DeviceBuffer).copyTo(chunk, { offset: off, size: n });
      hash.update(chunk.subarray(0, n));
    } else hash.update((target as Buffer).subarray(off, off + n));
    onProgress(off + n);
  }
  return hash.digest('hex');
}

/** sha256 of a file, read in chunks (a whole-file read stops at 2 GiB). */
function hashFile(file: string, size: number, progress: boolean): string {
  const hash = crypto.createHash('sha256');
  const bar = new ProgressBar({ label: 'hashing the file', total: size, enabled: progress });
  const fd = fs.openSync(file, 'r');
  try {
    const chunk = Buffer.allocUnsafeSlow(CHUNK);
    for (let off = 0; ; ) {
      const n = fs.readSync(fd, chunk, 0, CHUNK, off);
      if (n === 0) break;
      hash.update(chunk.subarray(0, n));
      off += n;
      bar.update(off);
    }
  } finally {
    fs.closeSync(fd);
    bar.finish();
  }
  return hash.digest('hex');
}

/** Writes `size` random bytes and returns their sha256 (hashed as written, never read back). */
function writeSample(fd: number, size: number, progress: boolean): string {
  const hash = crypto.createHash('sha256');
  const bar = new ProgressBar({ label: 'creating the sample', total: size, enabled: progress });
  try {
    // Fresh random bytes per chunk, so a misplaced chunk cannot verify by accident.
    const chunk = Buffer.allocUnsafeSlow(Math.min(size, CHUNK));
    for (let off = 0; off < size; ) {
      const n = Math.min(size - off, CHUNK);
      crypto.randomFillSync(chunk, 0, n);
      let done = 0;
      while (done < n) done += fs.writeSync(fd, chunk, done, n - done, off + done);
      hash.update(chunk.subarray(0, n));
      off += n;
      bar.update(off);
    }
  } finally {
    bar.finish();
  }
  return hash.digest('hex');
}

function printRoute(out: (s: string) => void, f: PenstockFile, stats: StatsSnapshot, gpu: boolean): void {
  const used = ROUTES.filter((r) => stats.routes[r].ops > 0);
  const parts = used.map((r) => `${r} (${stats.routes[r].ops} ops, ${stats.routes[r].bytes} bytes)`);
  out(`Route: ${parts.join(', ') || 'none'}`);
  const reason = f.route.reason;
  if (gpu && reason) out(`Why not GPUDirect Storage: [${reason.code}] ${reason.message}`);
}
