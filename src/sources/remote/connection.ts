/**
 * HTTP/1.1 on kept-alive connections, for ranged GETs and HEADs only, read without copies in
 * between: each connection reads its socket into one fixed buffer of its own (`onread`), and a
 * response's body is handed on as views of that buffer, so the one copy a body byte takes in
 * JavaScript is the sink's, straight into its destination. No stream, no per-read allocation, no
 * copy by an HTTP parser. What the responses say is checked by the caller (http.ts); here only the
 * framing: status line, header fields, Content-Length, chunked bodies, bodies that end with the
 * connection, and whether the connection can carry the next request.
 */
import net from 'node:net';
import tls from 'node:tls';
import type { LookupFunction } from 'node:net';
import { RemoteError } from './errors.js';
import { absoluteForm, openTunnel, proxyFor, proxySettingsFromEnv, type Proxy, type ProxySettings } from './proxy.js';

/** Bytes a connection reads from its socket at most at once (its fixed read buffer). */
const READ_BUFFER_BYTES = 256 * 1024;
/** The most bytes a response's status line and header fields may take. */
const MAX_HEAD_BYTES = 64 * 1024;

/** A response's status line and header fields (names in lower case; the first of repeated fields). */
export interface ResponseHead {
  status: number;
  /** 0 for HTTP/1.0, 1 for HTTP/1.1. */
  minor: number;
  headers: Map<string, string>;
}

/** What one exchange is told, in order: the head, body pieces, then the end or a failure. */
export interface ResponseHandler {
  head(head: ResponseHead): void;
  /** A piece of the body: a view of the connection's read buffer, valid only during the call. */
  body(chunk: Buffer): void;
  /** The response is complete. */
  end(): void;
  /** The connection failed (`error`: a socket error) or broke the protocol before the end. */
  fail(why: ConnectionFailure): void;
}

/** Why an exchange ended before its response did. */
export type ConnectionFailure =
  | { kind: 'socket'; error: NodeJS.ErrnoException }
  | { kind: 'closed'; gotHead: boolean }
  | { kind: 'protocol'; message: string }
  | { kind: 'proxy'; error: RemoteError };

type Framing = { kind: 'none' } | { kind: 'length'; left: number } | { kind: 'chunked' } | { kind: 'close' };

/**
 * One connection. While an exchange runs it belongs to that exchange's handler; between
 * exchanges it is idle in its pool, and any byte or close that arrives then retires it.
 */
class Connection {
  socket: net.Socket;
  readonly origin: string;
  /** Through a plain proxy (http:// objects): requests go whole to it, with its credentials. */
  #absolute: { authorization?: string } | undefined;
  /** Through a CONNECT tunnel not yet open: the request to write once it is. */
  #queued: string | undefined;
  #tunnelling = false;
  #handler: ResponseHandler | undefined;
  #head = false;
  #state: 'idle' | 'head' | 'body' | 'chunk-size' | 'chunk-data' | 'chunk-end' | 'trailer' = 'idle';
  #headText = '';
  #line = '';
  #framing: Framing = { kind: 'none' };
  #keepAlive = false;
  #gotHead = false;
  #dead = false;
  readonly #onGone: (c: Connection) => void;

  constructor(url: URL, origin: string, lookup: LookupFunction | undefined, ca: readonly string[] | undefined, onGone: (c: Connection) => void, proxy?: Proxy) {
    this.origin = origin;
    this.#onGone = onGone;
    const host = url.hostname.replace(/^\[|\]$/g, '');
    const port = Number(url.port || (url.protocol === 'https:' ? 443 : 80));
    const buffer = Buffer.allocUnsafeSlow(READ_BUFFER_BYTES);
    const onread = {
      buffer,
      callback: (n: number, buf: Uint8Array) => {
        this.#onRead(buf as Buffer, n);
        return true;
      },
    };
    const common = { host, port, onread, ...(lookup ? { lookup } : {}) };
    const secure = { ...(net.isIP(host) ? {} : { servername: host }), ...(ca ? { ca: [...ca] } : {}) };
    if (proxy && url.protocol === 'https:') {
      this.#tunnelling = true;
      this.socket = openTunnel(proxy, host, port, lookup, (err, raw) => {
        this.#tunnelling = false;
        if (err || !raw) return this.#gone({ kind: 'proxy', error: err as RemoteError });
        // TLS over an open socket takes no `onread`: its reads come as 'data' (an allocation
        // each; the tunnel is not the fast path).
        const t = tls.connect({ socket: raw, ...secure });
        t.on('data', (chunk: Buffer) => this.#onRead(chunk, chunk.length));
        this.#watch(t);
        this.socket = t;
        if (this.#dead) t.destroy();
        const q = this.#queued;
        this.#queued = undefined;
        if (q !== undefined) t.write(q, 'latin1');
      });
    } else if (proxy) {
      this.#absolute = proxy.authorization ? { authorization: proxy.authorization } : {};
      this.socket = net.connect({ ...common, host: proxy.host, port: proxy.port });
    } else {
      this.socket = url.protocol === 'https:' ? tls.connect({ ...common, ...secure }) : net.connect(common);
    }
    this.socket.setNoDelay(true);
    this.socket.setKeepAlive(true, 1000);
    this.#watch(this.socket);
  }

  #watch(socket: net.Socket): void {
    socket.on('error', (error: NodeJS.ErrnoException) => {
      // While the tunnel opens, its own failure (with the proxy named) is the one reported.
      if (!this.#tunnelling) this.#gone({ kind: 'socket', error });
    });
    socket.on('close', () => {
      if (!this.#tunnelling) this.#gone(undefined);
    });
  }

  /** Whether the socket has gone (closed, failed or destroyed). */
  get dead(): boolean {
    return this.#dead;
  }

  /** Starts an exchange: writes `request` and reads the response into `handler`. */
  exchange(request: string, head: boolean, handler: ResponseHandler): void {
    this.#handler = handler;
    this.#head = head;
    this.#state = 'head';
    this.#headText = '';
    this.#gotHead = false;
    this.#framing = { kind: 'none' };
    this.socket.ref();
    if (this.#absolute) request = absoluteForm(request, this.origin, this.#absolute.authorization);
    if (this.#tunnelling) this.#queued = request;
    else this.socket.write(request, 'latin1');
  }

  /** Ends the exchange early (its owner does): the connection cannot be used again. */
  destroy(): void {
    this.#handler = undefined;
    this.#dead = true;
    this.socket.destroy();
  }

  /** Closes the connection under its exchange (the pool is closing): the exchange hears it closed. */
  abandon(): void {
    const h = this.#handler;
    this.destroy();
    h?.fail({ kind: 'closed', gotHead: this.#gotHead });
  }

  /** Whether the last exchange left the connection fit for another. */
  get reusable(): boolean {
    return !this.#dead && this.#state === 'idle' && this.#keepAlive;
  }

  /** Marks the connection idle in its pool: it no longer keeps the process alive. */
  park(): void {
    this.#handler = undefined;
    this.socket.unref();
  }

  #gone(error: ConnectionFailure | undefined): void {
    const h = this.#handler;
    this.#dead = true;
    this.#handler = undefined;
    if (h) {
      if (error) h.fail(error);
      else if (this.#state === 'body' && this.#framing.kind === 'close') {
        // A body framed by the connection's end has ended.
        this.#state = 'idle';
        h.end();
      } else h.fail({ kind: 'closed', gotHead: this.#gotHead });
    }
    this.#onGone(this);
  }

  #protocol(message: string): void {
    const h = this.#handler;
    this.destroy();
    h?.fail({ kind: 'protocol', message });
  }

  #onRead(buf: Buffer, n: number): void {
    let pos = 0;
    while (pos < n) {
      const h = this.#handler;
      if (!h) {
        // Bytes nobody asked for (on an idle connection, or after a response ended): the
        // connection no longer follows the exchanges, so it is retired.
        this.destroy();
        return;
      }
      switch (this.#state) {
        case 'head': {
          const before = this.#headText.length;
          const take = Math.min(n - pos, MAX_HEAD_BYTES + 4 - before);
          this.#headText += buf.toString('latin1', pos, pos + take);
          const at = this.#headText.indexOf('\r\n\r\n', Math.max(0, before - 3));
          if (at < 0) {
            if (this.#headText.length > MAX_HEAD_BYTES) return this.#protocol(`a response head longer than ${MAX_HEAD_BYTES} bytes`);
            pos += take;
            break;
          }
          pos += at + 4 - before;
          const head = parseHead(this.#headText.slice(0, at));
          if (typeof head === 'string') return this.#protocol(head);
          this.#headText = '';
          // 1xx answers are interim: the real one follows.
          if (head.status >= 100 && head.status < 200) break;
          const framing = framingOf(head, this.#head);
          if (typeof framing === 'string') return this.#protocol(framing);
          this.#framing = framing;
          const connection = (head.headers.get('connection') ?? '').toLowerCase();
          this.#keepAlive = head.minor === 1 && framing.kind !== 'close' && !/(^|,)\s*close\s*(,|$)/.test(connection);
          this.#gotHead = true;
          this.#state = framing.kind === 'chunked' ? 'chunk-size' : 'body';
          this.#line = '';
          h.head(head);
          if (this.#handler !== h) return;
          if (framing.kind === 'none' || (framing.kind === 'length' && framing.left === 0)) this.#finish(h, pos < n);
          break;
        }
        case 'body': {
          const f = this.#framing;
          const take = f.kind === 'length' ? Math.min(f.left, n - pos) : n - pos;
          h.body(buf.subarray(pos, pos + take));
          pos += take;
          if (this.#handler !== h) return;
          if (f.kind === 'length' && (f.left -= take) === 0) this.#finish(h, pos < n);
          break;
        }
        case 'chunk-size':
        case 'chunk-end':
        case 'trailer': {
          const lf = buf.indexOf(10, pos);
          const end = lf < 0 || lf >= n ? n : lf + 1;
          this.#line += buf.toString('latin1', pos, end);
          pos = end;
          if (this.#line.length > 4096) return this.#protocol('a chunk line longer than 4096 bytes');
          if (!this.#line.endsWith('\n')) break;
          const line = this.#line.replace(/\r?\n$/, '');
          this.#line = '';
          if (this.#state === 'chunk-end') {
            if (line !== '') return this.#protocol('chunk data not followed by CRLF');
            this.#state = 'chunk-size';
          } else if (this.#state === 'chunk-size') {
            const m = /^([0-9a-fA-F]{1,12})\s*(;.*)?$/.exec(line);
            if (!m) return this.#protocol(`a malformed chunk size line '${line.slice(0, 40)}'`);
            const size = parseInt(m[1]!, 16);
            if (size === 0) this.#state = 'trailer';
            else {
              this.#framing = { kind: 'length', left: size };
              this.#state = 'chunk-data';
            }
          } else if (line === '') this.#finish(h, pos < n);
          break;
        }
        case 'chunk-data': {
          const f = this.#framing as { kind: 'length'; left: number };
          const take = Math.min(f.left, n - pos);
          h.body(buf.subarray(pos, pos + take));
          pos += take;
          if (this.#handler !== h) return;
          if ((f.left -= take) === 0) this.#state = 'chunk-end';
          break;
        }
        default:
          this.destroy();
          return;
      }
    }
  }

  /**
   * The response is complete. Bytes after it in the same read (`leftover`) answer nothing that
   * was asked: the connection is closed before the handler hears of the end (and gives it back).
   */
  #finish(h: ResponseHandler, leftover: boolean): void {
    this.#state = 'idle';
    if (leftover) this.destroy();
    this.#handler = undefined;
    h.end();
  }
}

/** Status line and header fields; a string saying what is wrong when they are not HTTP/1.x. */
export function parseHead(text: string): ResponseHead | string {
  const lines = text.split('\r\n');
  const m = /^HTTP\/1\.([01]) (\d{3})(?: [^\r\n]*)?$/.exec(lines[0] ?? '');
  if (!m) return `a response that is not HTTP/1.x ('${(lines[0] ?? '').slice(0, 40)}')`;
  const headers = new Map<string, string>();
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i]!;
    const colon = line.indexOf(':');
    const name = colon > 0 ? line.slice(0, colon) : '';
    if (!/^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/.test(name)) return `a malformed header line '${line.slice(0, 40)}'`;
    const key = name.toLowerCase();
    const value = line.slice(colon + 1).trim();
    const seen = headers.get(key);
    if (seen === undefined) headers.set(key, value);
    else if (key === 'content-length' && seen !== value) return `two Content-Length fields (${seen}, ${value})`;
  }
  return { status: Number(m[2]), minor: Number(m[1]), headers };
}

/** How the body of a response is delimited (RFC 9112 section 6.3); a string when it cannot be told. */
function framingOf(head: ResponseHead, toHead: boolean): Framing | string {
  if (toHead || head.status === 204 || head.status === 304) return { kind: 'none' };
  const te = head.headers.get('transfer-encoding');
  if (te !== undefined) return /(^|,)\s*chunked\s*$/i.test(te) ? { kind: 'chunked' } : { kind: 'close' };
  const cl = head.headers.get('content-length');
  if (cl === undefined) return { kind: 'close' };
  if (!/^\d{1,15}$/.test(cl)) return `a malformed Content-Length '${cl.slice(0, 40)}'`;
  return { kind: 'length', left: Number(cl) };
}

/** Header field names and values that may be written (as Node's own HTTP client allows). */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

/** Why a header field cannot be sent as given (a name that is no token, a value with CR, LF or NUL), or undefined. */
export function headerProblem(name: string, value: unknown): string | undefined {
  if (!TOKEN.test(name)) return `the header name ${JSON.stringify(name)} is not an HTTP token`;
  if (typeof value !== 'string') return `the value of header ${name} is not a string`;
  if (!FIELD_VALUE.test(value)) return `the value of header ${name} holds a character HTTP does not allow (CR, LF, NUL or another control)`;
  return undefined;
}

/** The request's bytes; throws a TypeError for a header name or value that cannot be sent. */
export function requestText(method: string, url: URL, headers: Record<string, string>): string {
  let text = `${method} ${url.pathname || '/'}${url.search} HTTP/1.1\r\n`;
  let host = false;
  for (const [name, value] of Object.entries(headers)) {
    const problem = headerProblem(name, value);
    if (problem) throw new TypeError(problem);
    if (name.toLowerCase() === 'host') host = true;
    text += `${name}: ${value}\r\n`;
  }
  if (!host) text += `Host: ${url.host}\r\n`;
  return `${text}\r\n`;
}

/** Kept-alive connections per origin, at most `maxSockets` each, shared by one object's requests. */
export class ConnectionPool {
  readonly #max: number;
  readonly #lookup: LookupFunction | undefined;
  readonly #ca: readonly string[] | undefined;
  readonly #proxy: ProxySettings;
  readonly #idle = new Map<string, Connection[]>();
  readonly #open = new Map<string, Set<Connection>>();
  readonly #waiting = new Map<string, Waiter[]>();
  #destroyed = false;

  /**
   * `ca`: certificates to trust for https:// besides the system's (a private CA, say); `proxy`:
   * the proxies to go through (default: the process's HTTPS_PROXY, HTTP_PROXY and NO_PROXY).
   */
  constructor(maxSockets: number, lookup?: LookupFunction, ca?: string, proxy: ProxySettings = proxySettingsFromEnv()) {
    this.#max = maxSockets;
    this.#lookup = lookup;
    this.#ca = ca ? [...tls.rootCertificates, ca] : undefined;
    this.#proxy = proxy;
  }

  /** The proxies this pool's connections go through (plain data, for worker threads). */
  get proxy(): ProxySettings {
    return this.#proxy;
  }

  #connect(url: URL, origin: string): Connection {
    return new Connection(url, origin, this.#lookup, this.#ca, (gone) => this.#forget(gone), proxyFor(url, this.#proxy));
  }

  /**
   * A connection to `url`'s origin for one exchange: an idle one (the most recently used), a new
   * one while fewer than `maxSockets` are open, else the next one given back.
   */
  acquire(url: URL, signal?: AbortSignal): Promise<Connection> {
    const origin = `${url.protocol}//${url.host}`;
    const idle = this.#idle.get(origin);
    while (idle && idle.length > 0) {
      const c = idle.pop()!;
      if (!c.dead) return Promise.resolve(c);
    }
    const open = this.#open.get(origin) ?? new Set<Connection>();
    this.#open.set(origin, open);
    if (open.size < this.#max && !this.#destroyed) {
      const c = this.#connect(url, origin);
      open.add(c);
      return Promise.resolve(c);
    }
    return new Promise((resolve, reject) => {
      const queue = this.#waiting.get(origin) ?? [];
      this.#waiting.set(origin, queue);
      const onAbort = () => {
        const i = queue.indexOf(w);
        if (i >= 0) queue.splice(i, 1);
        reject(signal!.reason);
      };
      const w: Waiter = {
        take: (c) => {
          signal?.removeEventListener('abort', onAbort);
          resolve(c);
        },
        refuse: (e) => {
          signal?.removeEventListener('abort', onAbort);
          reject(e);
        },
      };
      queue.push(w);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** Gives a connection back after an exchange: kept for the next one if it can carry it, else closed. */
  release(c: Connection): void {
    if (!c.reusable || this.#destroyed) {
      c.destroy();
      this.#forget(c);
      return;
    }
    const next = this.#waiting.get(c.origin)?.shift();
    if (next) return next.take(c);
    c.park();
    const idle = this.#idle.get(c.origin) ?? [];
    this.#idle.set(c.origin, idle);
    idle.push(c);
  }

  #forget(c: Connection): void {
    const open = this.#open.get(c.origin);
    if (!open?.delete(c)) return;
    const idle = this.#idle.get(c.origin);
    const i = idle?.indexOf(c) ?? -1;
    if (i >= 0) idle!.splice(i, 1);
    // Room for a new connection: a request waiting for one gets it.
    const next = this.#destroyed ? undefined : this.#waiting.get(c.origin)?.shift();
    if (next) {
      const url = new URL(c.origin);
      const fresh = this.#connect(url, c.origin);
      open.add(fresh);
      next.take(fresh);
    }
  }

  /** Closes every connection, idle or not. */
  destroy(): void {
    this.#destroyed = true;
    for (const open of this.#open.values()) for (const c of [...open]) c.abandon();
    this.#open.clear();
    this.#idle.clear();
    const waiting = [...this.#waiting.values()].flat();
    this.#waiting.clear();
    for (const w of waiting) w.refuse(new RemoteError('ERR_PENSTOCK_REMOTE_CLOSED', 'The remote object was closed while a request waited for a connection'));
  }
}

/** A request waiting for a connection. */
interface Waiter {
  take: (c: Connection) => void;
  refuse: (e: Error) => void;
}

export type { Connection };
