/**
 * A raw HTTP/1.1 server on 127.0.0.1 for hostile-server tests: each request's head is parsed and
 * handed to the test's function, which writes whatever bytes it likes on the socket (headers
 * Node's own server would refuse, bodies that trickle, answers that never end).
 */
import net from 'node:net';
import type { AddressInfo } from 'node:net';

/** A request as the raw server read it (header names in lower case). */
export interface RawRequest {
  method: string;
  target: string;
  headers: Record<string, string>;
}

/**
 * Answers one request: write on `socket` and return. Returning `'close'` ends the connection
 * after the answer; anything else keeps it for the next request.
 */
export type RawHandler = (req: RawRequest, socket: net.Socket) => void | 'close';

/** A raw server: every request received, its URL, and stop(). */
export class RawServer {
  readonly requests: RawRequest[] = [];
  readonly #server: net.Server;
  readonly #sockets = new Set<net.Socket>();
  port = 0;

  constructor(handler: RawHandler) {
    this.#server = net.createServer((socket) => {
      this.#sockets.add(socket);
      socket.on('close', () => this.#sockets.delete(socket));
      socket.on('error', () => undefined);
      let text = '';
      socket.on('data', (d: Buffer) => {
        text += d.toString('latin1');
        for (let at = text.indexOf('\r\n\r\n'); at >= 0; at = text.indexOf('\r\n\r\n')) {
          const lines = text.slice(0, at).split('\r\n');
          text = text.slice(at + 4);
          const [method = '', target = ''] = (lines[0] ?? '').split(' ');
          const headers: Record<string, string> = {};
          for (const line of lines.slice(1)) {
            const c = line.indexOf(':');
            const name = line.slice(0, c).toLowerCase();
            const value = line.slice(c + 1).trim();
            // Repeated fields joined, as Node's own server does, so that a repeat shows.
            headers[name] = headers[name] === undefined ? value : `${headers[name]}, ${value}`;
          }
          const req = { method, target, headers };
          this.requests.push(req);
          if (handler(req, socket) === 'close') socket.end();
        }
      });
    });
  }

  /** Starts listening on a free port of 127.0.0.1. */
  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.#server.listen(0, '127.0.0.1', resolve));
    this.port = (this.#server.address() as AddressInfo).port;
    return this;
  }

  /** The URL of `path`. */
  url(path = '/object'): string {
    return `http://127.0.0.1:${this.port}${path}`;
  }

  /** Closes every connection and stops listening. */
  async stop(): Promise<void> {
    for (const s of this.#sockets) s.destroy();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}

/** The first and last byte a `Range: bytes=a-b` header asks for (clamped to `size`). */
export function rangeOf(req: RawRequest, size: number): { first: number; last: number } {
  const m = /^bytes=(\d+)-(\d+)$/.exec(req.headers.range ?? '');
  if (!m) return { first: 0, last: size - 1 };
  return { first: Number(m[1]), last: Math.min(size - 1, Number(m[2])) };
}

/** A 206 answer's head for `[first, last]` of `size` bytes, with extra header lines. */
export function partialHead(first: number, last: number, size: number, extra: string[] = []): string {
  return ['HTTP/1.1 206 Partial Content', `Content-Range: bytes ${first}-${last}/${size}`, `Content-Length: ${last - first + 1}`, ...extra, '', ''].join('\r\n');
}
