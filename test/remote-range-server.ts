/**
 * The tests' own HTTP range server: serves objects from memory with HEAD, ranged GETs, ETags and
 * If-Match, on 127.0.0.1, with faults injected on request (status codes, resets, truncated or
 * overlong bodies, wrong Content-Range, ignored ranges, slow answers, objects overwritten
 * mid-read). Run as a program (`node remote-range-server.js --serve SIZE`) it serves one object of SIZE
 * pattern bytes at /object and prints its port, for benchmarks in another process.
 */
import crypto from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { fileURLToPath } from 'node:url';
import { updateInPieces } from '../src/digest.js';

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

// As a program: serve one object for a benchmark in another process.
// (`--serve` is required: the test runner runs every file of this folder as a program too.)
if (process.argv[1] === fileURLToPath(import.meta.url) && process.argv[2] === '--serve') {
  const size = Number(process.argv[3] ?? 1 << 30);
  const server = new RangeServer();
  const data = Buffer.allocUnsafe(size);
  crypto.randomFillSync(data);
  server.put('/object', data);
  void server.start().then(() => process.stdout.write(`${server.port}\n`));
  process.on('SIGTERM', () => void server.stop().then(() => process.exit(0)));
  // Started with an IPC channel (by a benchmark): stop when the parent goes.
  if (process.send) process.on('disconnect', () => void server.stop().then(() => process.exit(0)));
}
