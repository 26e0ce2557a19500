/**
 * The tests' own HTTP range server: serves objects from memory with HEAD, ranged GETs, ETags and
 * If-Match, on 127.0.0.1, with faults injected on request (status codes, resets, truncated or
 * overlong bodies, wrong Content-Range, ignored ranges, slow answers, objects overwritten
 * mid-read). Run as a program (`node remote-range-server.js --serve SIZE`, or through
 * {@link serveInChild}) it serves one object at /object from one or more processes and prints its
 * port, for benchmarks and tests that measure a reader in another process.
 */
import { spawn } from 'node:child_process';
import cluster from 'node:cluster';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import https from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { digestHex, updateInPieces } from '../src/memory/digest.js';

/** A fault for the next matching requests. */
export type Fault =
  | { kind: 'status'; status: number; headers?: Record<string, string>; body?: string }
  | { kind: 'reset' }
  | { kind: 'truncate' }
  | { kind: 'long-body' }
  | { kind: 'short-length' }
  | { kind: 'wrong-range' }
  | { kind: 'ignore-range' }
  | { kind: 'no-content-range' }
  | { kind: 'stall' }
  | { kind: 'slow'; ms: number }
  | { kind: 'overwrite'; data: Buffer };

interface Pending {
  fault: Fault;
  times: number;
  skip: number;
  method?: string;
  path?: string;
}

interface StoredObject {
  data: Buffer;
  etag: string;
  lastModified: string;
}

/** Options of {@link RangeServer.inject}. */
export interface InjectOptions {
  /** How many matching requests get the fault (default 1; Infinity for all). */
  times?: number;
  /** Matching requests to let through first (default 0). */
  after?: number;
  /** Only requests of this method (default: all). */
  method?: 'GET' | 'HEAD';
  /** Only requests for this path (default: all). */
  path?: string;
}

/** A request as the server saw it. */
export interface SeenRequest {
  method: string;
  path: string;
  range?: string;
  headers: http.IncomingHttpHeaders;
}

let version = 0;

/** An in-memory range server on 127.0.0.1. */
export class RangeServer {
  readonly #server: http.Server;
  readonly #objects = new Map<string, StoredObject>();
  readonly #faults: Pending[] = [];
  readonly #sockets = new Set<Socket>();
  /** Every request received, in order. */
  readonly requests: SeenRequest[] = [];
  /** Most connections open at once. */
  peakConnections = 0;
  /** Connections ever accepted. */
  connections = 0;
  /** Whether to send ETags (Last-Modified is always sent). */
  sendEtag = true;
  port = 0;

  /** Whether it speaks https (with `tls`: a key and certificate in PEM). */
  readonly secure: boolean;

  constructor(options: { tls?: { key: string; cert: string } } = {}) {
    this.secure = options.tls !== undefined;
    const handler = (req: http.IncomingMessage, res: http.ServerResponse) => this.#handle(req, res);
    this.#server = options.tls ? https.createServer(options.tls, handler) : http.createServer(handler);
    this.#server.keepAliveTimeout = 10_000;
    this.#server.on(this.secure ? 'secureConnection' : 'connection', (s: Socket) => {
      this.connections++;
      this.#sockets.add(s);
      this.peakConnections = Math.max(this.peakConnections, this.#sockets.size);
      s.on('close', () => this.#sockets.delete(s));
    });
  }

  /** Starts listening on a free port of 127.0.0.1. */
  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.#server.listen(0, '127.0.0.1', resolve));
    this.port = (this.#server.address() as AddressInfo).port;
    return this;
  }

  /** Stops listening and closes every connection. */
  async stop(): Promise<void> {
    for (const s of this.#sockets) s.destroy();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  /** The URL of `path` (default /object). */
  url(path = '/object'): string {
    return `${this.secure ? 'https' : 'http'}://127.0.0.1:${this.port}${path}`;
  }

  /** Serves `data` at `path` with a new ETag. */
  put(path: string, data: Buffer): void {
    version++;
    // In pieces: one update of 2 GiB or more throws (a benchmark serves objects that large).
    const etag = `"${updateInPieces(crypto.createHash('md5'), data).update(String(version)).digest('hex')}"`;
    this.#objects.set(path, { data, etag, lastModified: new Date(Date.UTC(2026, 0, 1, 0, 0, version % 60)).toUTCString() });
  }

  /** Queues a fault for the next matching requests. */
  inject(fault: Fault, options: InjectOptions = {}): void {
    const p: Pending = { fault, times: options.times ?? 1, skip: options.after ?? 0 };
    if (options.method) p.method = options.method;
    if (options.path) p.path = options.path;
    this.#faults.push(p);
  }

  /**
   * Forgets faults not yet used and the requests seen, and closes every connection, so that a
   * request a cancelled read left unread cannot arrive later and take the next test's fault.
   */
  reset(): void {
    for (const s of this.#sockets) s.destroy();
    this.#faults.length = 0;
    this.requests.length = 0;
  }

  #takeFault(method: string, path: string): Fault | undefined {
    for (let i = 0; i < this.#faults.length; i++) {
      const p = this.#faults[i]!;
      if (p.method && p.method !== method) continue;
      if (p.path && p.path !== path) continue;
      if (p.skip > 0) {
        p.skip--;
        continue;
      }
      if (--p.times <= 0) this.#faults.splice(i, 1);
      return p.fault;
    }
    return undefined;
  }

  #handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const path = (req.url ?? '/').replace(/\?.*$/s, '');
    const range = req.headers.range;
    this.requests.push({ method: req.method ?? '', path, ...(range ? { range } : {}), headers: req.headers });
    const fault = this.#takeFault(req.method ?? '', path);
    if (fault?.kind === 'slow') {
      setTimeout(() => this.#answer(req, res, path, undefined), fault.ms);
      return;
    }
    this.#answer(req, res, path, fault);
  }

  #answer(req: http.IncomingMessage, res: http.ServerResponse, path: string, fault: Fault | undefined): void {
    if (fault?.kind === 'reset') return void req.socket.destroy();
    if (fault?.kind === 'stall') return;
    if (fault?.kind === 'status') {
      res.writeHead(fault.status, fault.headers ?? {});
      return void res.end(fault.body ?? '');
    }
    if (fault?.kind === 'overwrite') this.put(path, fault.data);
    const obj = this.#objects.get(path);
    if (!obj) {
      res.writeHead(404);
      return void res.end('not found');
    }
    const ifMatch = req.headers['if-match'];
    if (ifMatch !== undefined && ifMatch !== obj.etag) {
      res.writeHead(412);
      return void res.end();
    }
    const size = obj.data.length;
    const common: Record<string, string> = { 'Last-Modified': obj.lastModified, 'Accept-Ranges': 'bytes' };
    if (this.sendEtag) common.ETag = obj.etag;
    const wanted = req.headers.range;
    if (req.method === 'HEAD') {
      res.writeHead(200, { ...common, 'Content-Length': String(size) });
      return void res.end();
    }
    const m = wanted ? /^bytes=(\d*)-(\d*)$/.exec(wanted) : null;
    if (!m || fault?.kind === 'ignore-range') {
      res.writeHead(200, { ...common, 'Content-Length': String(size) });
      return void res.end(obj.data);
    }
    let first: number;
    let last: number;
    if (m[1] === '') {
      first = Math.max(0, size - Number(m[2]));
      last = size - 1;
    } else {
      first = Number(m[1]);
      last = m[2] === '' ? size - 1 : Math.min(size - 1, Number(m[2]));
    }
    if (first >= size || last < first) {
      res.writeHead(416, { ...common, 'Content-Range': `bytes */${size}` });
      return void res.end();
    }
    let body = obj.data.subarray(first, last + 1);
    let cr = `bytes ${first}-${last}/${size}`;
    let length = body.length;
    if (fault?.kind === 'wrong-range') cr = `bytes ${first + 1}-${last + 1}/${size}`;
    if (fault?.kind === 'short-length') length = Math.max(0, body.length - 1);
    const headers: Record<string, string> = { ...common, 'Content-Length': String(length) };
    if (fault?.kind !== 'no-content-range') headers['Content-Range'] = cr;
    if (fault?.kind === 'long-body') {
      // No Content-Length, so the body can run on past the range until the connection closes.
      delete headers['Content-Length'];
      headers.Connection = 'close';
      res.writeHead(206, headers);
      return void res.end(Buffer.concat([body, Buffer.alloc(16, 0x55)]));
    }
    res.writeHead(206, headers);
    if (fault?.kind === 'truncate') {
      res.write(body.subarray(0, Math.floor(body.length / 2)), () => req.socket.destroy());
      return;
    }
    if (fault?.kind === 'short-length') body = body.subarray(0, length);
    res.end(body);
  }
}

/** What a served object is: its port, size and (when asked for) sha256. */
export interface Served {
  port: number;
  size: number;
  sha256?: string;
  /** The server's processes. */
  processes: number;
}

/** Options of {@link serveInChild}. */
export interface ServeOptions {
  /** Serve this file's bytes (read in pieces, so it may be 2 GiB or more) instead of generated ones. */
  file?: string;
  /** Processes serving it (each with its own copy; the bytes are the same in each). Default 1. */
  processes?: number;
  /** Also report the object's sha256. */
  digest?: boolean;
}

/**
 * The object's bytes when none are given: AES-128-CTR keystream from a fixed key, so every process
 * that serves it makes the same bytes, which look random, at gigabytes per second.
 */
export function generatedBytes(size: number): Buffer {
  const out = Buffer.allocUnsafeSlow(size);
  const cipher = crypto.createCipheriv('aes-128-ctr', Buffer.alloc(16, 0x5e), Buffer.alloc(16, 0));
  const zeros = Buffer.alloc(Math.min(size, 64 << 20));
  for (let at = 0; at < size; ) {
    const n = Math.min(zeros.length, size - at);
    at += cipher.update(zeros.subarray(0, n)).copy(out, at);
  }
  return out;
}

function readWhole(file: string): Buffer {
  const fd = fs.openSync(file, 'r');
  try {
    const size = fs.fstatSync(fd).size;
    const out = Buffer.allocUnsafeSlow(size);
    for (let at = 0; at < size; ) {
      const n = fs.readSync(fd, out, at, Math.min(1 << 30, size - at), at);
      if (n === 0) throw new Error(`${file} ended at ${at} of ${size} bytes`);
      at += n;
    }
    return out;
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * How many processes serve an object of `size` bytes by default: a quarter of the cores (1 to 8),
 * so that the server is not what limits the reader measured, but no more than a quarter of the
 * memory can hold (each process has its own copy).
 */
export function defaultServerProcesses(size: number): number {
  const byCores = Math.max(1, Math.min(8, Math.floor(os.availableParallelism() / 4)));
  return Math.max(1, Math.min(byCores, Math.floor(os.totalmem() / 4 / Math.max(1, size))));
}

/**
 * Starts this program in a child process (or several, through `cluster`) serving one object at
 * /object on 127.0.0.1, so that a benchmark or test reading it measures its own CPU only. The
 * child stops with the parent (an IPC channel) or with `stop()`.
 */
export function serveInChild(size: number, options: ServeOptions = {}): Promise<Served & { stop: () => void }> {
  const args = ['--serve', String(size), '--processes', String(options.processes ?? 1), ...(options.file ? ['--file', options.file] : []), ...(options.digest ? ['--digest'] : [])];
  const child = spawn(process.execPath, [fileURLToPath(import.meta.url), ...args], { stdio: ['ignore', 'pipe', 'inherit', 'ipc'] });
  return new Promise((resolve, reject) => {
    let text = '';
    child.stdout!.on('data', (d: Buffer) => {
      text += d.toString();
      const line = /^(\{.*\})\n/.exec(text);
      if (line) resolve({ ...(JSON.parse(line[1]!) as Served), stop: () => void child.kill('SIGTERM') });
    });
    child.on('exit', (code) => reject(new Error(`remote-range-server.js exited (${code}) before serving`)));
  });
}

// As a program: serve one object for a benchmark or test in another process.
// (`--serve` is required: the test runner runs every file of this folder as a program too.)
if (process.argv[1] === fileURLToPath(import.meta.url) && process.argv[2] === '--serve') {
  const { values } = parseArgs({
    args: process.argv.slice(4),
    options: { processes: { type: 'string' }, file: { type: 'string' }, digest: { type: 'boolean' } },
  });
  const processes = Math.max(1, Number(values.processes ?? 1));
  const stopWith = (stop: () => Promise<void>) => {
    process.on('SIGTERM', () => void stop().then(() => process.exit(0)));
    // Started with an IPC channel (by a benchmark or test): stop when the parent goes.
    if (process.send) process.on('disconnect', () => void stop().then(() => process.exit(0)));
  };
  if (cluster.isPrimary && processes > 1) {
    // The primary only accepts connections and hands them out; the workers serve.
    cluster.setupPrimary({ args: process.argv.slice(2), stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
    const workers = Array.from({ length: processes }, () => cluster.fork());
    const ready = workers.map((w) => new Promise<{ port: number; size: number; sha256?: string }>((resolve) => w.once('message', resolve)));
    void Promise.all(ready).then((all) => process.stdout.write(`${JSON.stringify({ ...all[0]!, processes })}\n`));
    cluster.on('exit', (w, code) => {
      if (code !== 0 && code !== null) process.exit(1);
    });
    stopWith(async () => {
      const exited = workers.map((w) => new Promise((resolve) => (w.isDead() ? resolve(undefined) : w.once('exit', resolve))));
      for (const w of workers) w.kill('SIGTERM');
      await Promise.race([Promise.all(exited), new Promise((resolve) => setTimeout(resolve, 5000))]);
    });
  } else {
    const data = values.file ? readWhole(values.file) : generatedBytes(Number(process.argv[3] ?? 1 << 30));
    const sha256 = values.digest ? digestHex('sha256', data) : undefined;
    const server = new RangeServer();
    server.put('/object', data);
    void server.start().then(() => {
      const served = { port: server.port, size: data.length, ...(sha256 ? { sha256 } : {}) };
      if (cluster.isWorker) process.send!(served);
      else process.stdout.write(`${JSON.stringify({ ...served, processes: 1 })}\n`);
    });
    // A cluster worker just exits (closing its server would message the primary, which may be gone).
    stopWith(cluster.isWorker ? async () => undefined : () => server.stop());
  }
}
