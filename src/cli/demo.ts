/**
 * `penstock demo` (what `npm start` runs): creates a sample file, reads it into GPU memory (host
 * memory where there is no GPU), verifies it byte for byte, and prints the route, bytes, seconds
 * and GB/s.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { DeviceBuffer, open, hasGpu, parseSize, formatSize, getConfig, runtimeInfo, ROUTES, type PenstockFile, type StatsSnapshot } from '../index.js';

export async function runDemo(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      size: { type: 'string', default: '256MiB' },
      file: { type: 'string' },
      host: { type: 'boolean', default: false },
    },
  });
  const size = parseSize(values.size!);
  const own = values.file === undefined;
  const file = values.file ?? path.join(os.tmpdir(), `penstock-demo-${process.pid}.bin`);
  const out = (s: string) => process.stdout.write(s + '\n');
  try {
    if (own) {
      out(`Creating a ${formatSize(size)} sample file: ${file}`);
      writeSample(file, size);
    }
    const fileSize = fs.statSync(file).size;
    const expected = crypto.createHash('sha256').update(fs.readFileSync(file)).digest('hex');
    const gpu = !values.host && hasGpu();
    const rt = runtimeInfo();
    if (!gpu)
      out(values.host ? 'Target: host memory (--host).' : `No usable GPU here (${rt.cuda.error ?? rt.cuda.initError?.code ?? 'no device'}): reading into host memory instead.`);
    const f = await open(file, 'r');
    let result: { seconds: number; stats: StatsSnapshot; hash: string };
    try {
      result = gpu ? await timedRead(f, fileSize, DeviceBuffer.alloc(fileSize)) : await timedRead(f, fileSize, Buffer.allocUnsafeSlow(fileSize));
      printRoute(out, f, result.stats, gpu);
    } finally {
      await f.close();
    }
    const { seconds } = result;
    const got = result.hash;
    const ok = got === expected;
    out(`Verified: ${ok ? 'yes, sha256 matches the file' : 'NO — the data differs from the file'} (${expected.slice(0, 16)}…)`);
    out(`Bytes: ${fileSize}  Seconds: ${seconds.toFixed(4)}  Throughput: ${(fileSize / seconds / 1e9).toFixed(2)} GB/s (warm, threads ${getConfig().threads}, task size ${formatSize(getConfig().taskSize)})`);
    return ok ? 0 : 1;
  } finally {
    if (own) fs.rmSync(file, { force: true });
  }
}

/** Reads the whole file once to warm it, then times a second read and hashes what arrived. */
async function timedRead(f: PenstockFile, size: number, target: DeviceBuffer | Buffer) {
  try {
    await f.read(target); // warms the page cache and settles the route
    f.resetStats();
    const t0 = process.hrtime.bigint();
    const n = await f.read(target);
    const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
    if (n !== size) throw new Error(`short read: ${n} of ${size} bytes`);
    const bytes = target instanceof DeviceBuffer ? await target.toBuffer() : target;
    return { seconds, stats: f.stats(), hash: crypto.createHash('sha256').update(bytes).digest('hex') };
  } finally {
    if (target instanceof DeviceBuffer) target.free();
  }
}

function printRoute(out: (s: string) => void, f: PenstockFile, stats: StatsSnapshot, gpu: boolean): void {
  const used = ROUTES.filter((r) => stats.routes[r].ops > 0);
  const parts = used.map((r) => `${r} (${stats.routes[r].ops} ops, ${stats.routes[r].bytes} bytes)`);
  out(`Target: ${gpu ? 'GPU 0 memory' : 'host memory'}`);
  out(`Route: ${parts.join(', ') || 'none'}`);
  const reason = f.route.reason;
  if (gpu && reason) out(`Why not GPUDirect Storage: [${reason.code}] ${reason.message}`);
}

function writeSample(file: string, size: number): void {
  const fd = fs.openSync(file, 'w');
  try {
    // Fresh random bytes per chunk, so a misplaced chunk cannot verify by accident.
    for (let off = 0; off < size; ) {
      const chunk = crypto.randomBytes(Math.min(size - off, 8 << 20));
      fs.writeSync(fd, chunk, 0, chunk.length, off);
      off += chunk.length;
    }
  } finally {
    fs.closeSync(fd);
  }
}
