/**
 * `npm run bench:remote`: remote reads against a loopback range server (in its own process) and
 * against s3rver: penstock's parallel ranged reads into host and GPU memory, against the plain
 * Node way (`fetch` of the whole object, then a copy), a single-connection ranged read, and
 * HTTP parsed in worker threads (`remoteWorkers`). Ends with the remote targets, each measured or
 * marked not measured.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ArgError, parseCommandLine, parseIntArg, parseIntList, parseSizeArg } from '../src/cli/kit/args.js';
import { formatCpu, formatGBps, formatSize, textTable } from '../src/cli/kit/format.js';
import { median } from '../src/cli/bench/stats.js';
import { machineInfo, mainThreadCpuSeconds } from '../src/cli/bench/system.js';
import { DeviceBuffer, hasGpu, type Memory } from '../src/index.js';
import { openRemote, presignS3Url, type OpenRemoteOptions } from '../src/remote.js';
import { cudaUnavailableReason } from '../src/addon/runtime.js';
import { defaultServerProcesses, serveInChild } from '../test/remote-range-server.js';

const MiB = 1024 * 1024;
const here = path.dirname(fileURLToPath(import.meta.url));
const testDir = path.join(here, '../test');

interface Row {
  server: string;
  method: string;
  /** `shared host`: a SharedArrayBuffer, which worker threads write into themselves. */
  target: 'host' | 'shared host' | 'device';
  bytes: number;
  gbps: number[];
  cpuPerGB: number;
  mainCpuPerGB?: number;
  note?: string;
}

const USAGE = `Usage: npm run bench:remote -- [options]

  --size SIZE          object on the loopback range server (default 4GiB with a GPU, 512MiB without)
  --s3-size SIZE       object on s3rver (default 64MiB; it serves ~0.1 GB/s)
  --concurrency N      penstock's ranged GETs in flight (default 16)
  --range-size SIZE    bytes per ranged GET (default 8MiB)
  --workers LIST       remoteWorkers values beside the main thread's rows (default 2,4)
  --server-processes N processes of the loopback range server (default cores / 4, 1 to 8, as
                       memory allows), so that the server is not what limits the reader
  --repeat N           timed repeats (default 3)
  --no-s3rver          skip the s3rver rows
  --json OUT           also write the rows as JSON
`;

/** Starts s3rver in its own process; resolves to its port. */
function serveS3rver(size: number): Promise<{ port: number; child: ChildProcess }> {
  const child = spawn(process.execPath, [path.join(testDir, 'sources/remote/s3rver.js'), '--serve', String(size)], { stdio: ['ignore', 'pipe', 'inherit', 'ipc'] });
  return new Promise((resolve, reject) => {
    let text = '';
    child.stdout!.on('data', (d: Buffer) => {
      text += d.toString();
      const m = /^(\d+)\n/.exec(text);
      if (m) resolve({ port: Number(m[1]), child });
    });
    child.on('exit', (code) => reject(new Error(`s3rver.js exited (${code}) before serving`)));
  });
}

interface Timed {
  gbps: number[];
  /** CPU seconds per GB of every thread of this process. */
  cpuPerGB: number;
  /** CPU seconds per GB of the main thread alone (undefined where it cannot be told). */
  mainCpuPerGB?: number;
}

async function timed(bytes: number, repeat: number, once: () => Promise<number>): Promise<Timed> {
  await once();
  const gbps: number[] = [];
  let cpu = 0;
  const m0 = mainThreadCpuSeconds();
  for (let i = 0; i < repeat; i++) {
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    const n = await once();
    const s = (performance.now() - t0) / 1e3;
    const c = process.cpuUsage(c0);
    if (n !== bytes) throw new Error(`read ${n} of ${bytes} bytes`);
    cpu += (c.user + c.system) / 1e6;
    gbps.push(n / s / 1e9);
  }
  const m1 = mainThreadCpuSeconds();
  const gb = (bytes * repeat) / 1e9;
  return { gbps, cpuPerGB: cpu / gb, ...(m0 !== undefined && m1 !== undefined ? { mainCpuPerGB: (m1 - m0) / gb } : {}) };
}

/** penstock's read of the whole object into `target`. */
async function penstockRead(url: string, options: OpenRemoteOptions, target: Memory, bytes: number, repeat: number) {
  await using obj = await openRemote(url, options);
  return await timed(bytes, repeat, () => obj.read(target, { size: bytes }));
}

/** The plain Node way: fetch the whole object, then copy it where it is wanted. */
async function fetchRead(url: string, target: Memory, bytes: number, repeat: number) {
  return timed(bytes, repeat, async () => {
    const res = await fetch(url);
    const body = new Uint8Array(await res.arrayBuffer());
    if (target instanceof DeviceBuffer) await target.copyFrom(body);
    else (target as Buffer).set(body);
    return body.length;
  });
}

async function main(argv: string[]): Promise<number> {
  const gpu = hasGpu();
  const { values: v } = parseCommandLine({
    args: argv, strict: true,
    options: {
      size: { type: 'string' }, 's3-size': { type: 'string' }, concurrency: { type: 'string' }, 'range-size': { type: 'string' },
      workers: { type: 'string' }, 'server-processes': { type: 'string' }, repeat: { type: 'string' }, 'no-s3rver': { type: 'boolean' }, json: { type: 'string' }, help: { type: 'boolean', short: 'h' },
    },
  });
  if (v.help) {
    process.stdout.write(USAGE);
    return 0;
  }
  const size = v.size ? parseSizeArg(v.size, '--size') : gpu ? 4 * 1024 * MiB : 512 * MiB;
  const s3Size = v['s3-size'] ? parseSizeArg(v['s3-size'], '--s3-size') : 64 * MiB;
  const concurrency = v.concurrency ? parseIntArg(v.concurrency, '--concurrency', 1, 1024) : 16;
  const rangeSize = v['range-size'] ? parseSizeArg(v['range-size'], '--range-size') : 8 * MiB;
  const workerCounts = v.workers ? parseIntList(v.workers, '--workers', 1, 256) : [2, 4];
  const repeat = v.repeat ? parseIntArg(v.repeat, '--repeat', 1, 100) : 3;
  const serverProcesses = v['server-processes'] ? parseIntArg(v['server-processes'], '--server-processes', 1, 64) : defaultServerProcesses(size);
  const m = machineInfo();
  process.stdout.write(`penstock remote benchmark — ${os.hostname()}, ${m.cpuModel ?? 'CPU'} × ${os.availableParallelism()}, Node ${process.version}\n`);
  process.stdout.write(`GPU: ${gpu ? 'yes' : `no (${cudaUnavailableReason() ?? 'none usable'})`}; ranges ${formatSize(rangeSize)}, concurrency ${concurrency}, ${repeat} timed repeats after one untimed\n`);
  process.stdout.write(`loopback range server: ${serverProcesses} process${serverProcesses === 1 ? '' : 'es'}\n\n`);

  const rows: Row[] = [];
  // The main thread's rows say so explicitly, whatever remoteWorkers defaults to.
  const opts: OpenRemoteOptions = { remoteConcurrency: concurrency, remoteRangeSize: rangeSize, remoteWorkers: 0 };
  const single: OpenRemoteOptions = { remoteConcurrency: 1, remoteRangeSize: rangeSize, remoteWorkers: 0 };
  const host = Buffer.allocUnsafeSlow(size);
  // Worker threads write host memory only when it is shared; any other is written on the main thread.
  const shared = workerCounts.length > 0 ? new Uint8Array(new SharedArrayBuffer(size)) : undefined;
  const device = gpu ? DeviceBuffer.alloc(size) : undefined;
  const range = await serveInChild(size, { processes: serverProcesses });
  try {
    const url = `http://127.0.0.1:${range.port}/object`;
    const add = async (method: string, target: Row['target'], run: () => Promise<Timed>, note?: string) => {
      process.stdout.write(`  ${method} → ${target} …\n`);
      rows.push({ server: 'loopback range server', method, target, bytes: size, ...(await run()), ...(note ? { note } : {}) });
    };
    await add(`penstock, ${concurrency} connections, main thread`, 'host', () => penstockRead(url, opts, host, size, repeat));
    await add('penstock, 1 connection, main thread', 'host', () => penstockRead(url, single, host, size, repeat));
    await add('fetch whole object, then copy', 'host', () => fetchRead(url, host, size, repeat));
    for (const w of workerCounts)
      await add(`penstock, ${concurrency} connections, ${w} worker threads`, 'shared host', () => penstockRead(url, { ...opts, remoteWorkers: w }, shared!, size, repeat));
    if (device) {
      await add(`penstock, ${concurrency} connections, main thread`, 'device', () => penstockRead(url, opts, device, size, repeat));
      await add('penstock, 1 connection, main thread', 'device', () => penstockRead(url, single, device, size, repeat));
      for (const w of workerCounts)
        await add(`penstock, ${concurrency} connections, ${w} worker threads`, 'device', () => penstockRead(url, { ...opts, remoteWorkers: w }, device, size, repeat));
      await add('fetch whole object, then copy', 'device', () => fetchRead(url, device, size, repeat));
    }
  } finally {
    range.stop();
  }

  if (!v['no-s3rver']) {
    const s3 = await serveS3rver(s3Size);
    try {
      const endpoint = `http://127.0.0.1:${s3.port}`;
      const credentials = { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' };
      const s3host = host.subarray(0, s3Size);
      const add = async (method: string, run: () => Promise<Timed>) => {
        process.stdout.write(`  s3rver: ${method} → host …\n`);
        rows.push({ server: 's3rver', method, target: 'host', bytes: s3Size, ...(await run()) });
      };
      await add(`penstock s3://, signed, ${concurrency} connections`, () => penstockRead('s3://bench/object', { ...opts, endpoint, credentials }, s3host, s3Size, repeat));
      await add('penstock s3://, signed, 1 connection', () => penstockRead('s3://bench/object', { ...single, endpoint, credentials }, s3host, s3Size, repeat));
      await add('fetch of a presigned URL, then copy', () => fetchRead(presignS3Url('s3://bench/object', { endpoint, credentials }), s3host, s3Size, repeat));
    } finally {
      s3.child.kill('SIGTERM');
    }
  }
  device?.free();

  process.stdout.write('\n');
  process.stdout.write(
    textTable(
      ['server', 'method', 'into', 'size', 'GB/s median', 'min', 'max', 'CPU s/GB', 'main thread s/GB'],
      rows.map((r) => [r.server, r.method, r.target, formatSize(r.bytes), formatGBps(median(r.gbps)), formatGBps(Math.min(...r.gbps)), formatGBps(Math.max(...r.gbps)), formatCpu(r.cpuPerGB), formatCpu(r.mainCpuPerGB)]),
      ['left', 'left', 'left', 'right', 'right', 'right', 'right', 'right', 'right'],
    ),
  );
  process.stdout.write(`\nCPU s/GB: this process (every thread), user + system, per GB moved; main thread s/GB: its main thread alone. The servers run in their own processes.\n\n`);
  process.stdout.write(targets(rows, concurrency));
  if (v.json) fs.writeFileSync(v.json, JSON.stringify({ machine: m, size, s3Size, concurrency, rangeSize, repeat, serverProcesses, rows }, null, 2));
  return 0;
}

/** The remote targets, each with its measured value, or why it was not measured. */
export function targets(rows: Row[], concurrency: number): string {
  const find = (method: string, target: string) => rows.find((r) => r.server === 'loopback range server' && r.method === method && r.target === target);
  // The fastest of penstock's parallel rows (main thread or worker threads), named.
  const dev = rows
    .filter((r) => r.server === 'loopback range server' && r.target === 'device' && r.method.startsWith(`penstock, ${concurrency} connections`))
    .sort((a, b) => median(b.gbps) - median(a.gbps))[0];
  const plain = find('fetch whole object, then copy', 'device');
  const lines = ['Targets (GPU machine, loopback range server on the same machine):'];
  const mark = (ok: boolean) => (ok ? 'pass' : 'miss');
  if (!dev || !plain) {
    const why = 'not measured: no GPU here';
    lines.push(`  remote → GPU ≥ 5 GB/s over loopback:        ${why}`);
    lines.push(`  remote → GPU ≥ 3× the plain Node way:      ${why}`);
    lines.push(`  client CPU ≤ 1 s per GB (remote → GPU):    ${why}`);
  } else {
    const g = median(dev.gbps);
    const ratio = g / median(plain.gbps);
    lines.push(`  (best penstock row: ${dev.method})`);
    lines.push(`  remote → GPU ≥ 5 GB/s over loopback:        ${formatGBps(g)} GB/s  ${mark(g >= 5)}`);
    lines.push(`  remote → GPU ≥ 3× the plain Node way:      ${ratio.toFixed(2)}× (fetch then copy: ${formatGBps(median(plain.gbps))} GB/s)  ${mark(ratio >= 3)}`);
    lines.push(`  client CPU ≤ 1 s per GB (remote → GPU):    ${formatCpu(dev.cpuPerGB)} s/GB  ${mark(dev.cpuPerGB <= 1)}`);
  }
  return `${lines.join('\n')}\n`;
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (e: unknown) => {
    process.stderr.write(`bench:remote: ${e instanceof ArgError ? '' : ''}${(e as Error).stack ?? String(e)}\n`);
    process.exitCode = 1;
  },
);
