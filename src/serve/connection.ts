/**
 * One client's connection to the daemon: lines in, requests answered in any order (each answer
 * carries its request's id), and the leases the connection holds, all ended when it closes —
 * so a client that crashes frees what it held without saying so.
 */
import type net from 'node:net';
import { usage } from '../vocabulary/errors.js';
import { answerLine, errorLine, parseRequest, requestIdOf, type ServeRequest } from './protocol.js';
import type { ResidentSets } from './resident-sets.js';

/** What a connection needs from its daemon besides the sets. */
export interface ConnectionHost {
  /** The resident sets. */
  sets: ResidentSets;
  /** The body of a `stats` answer. */
  stats(): Record<string, unknown>;
  /** The body of a `health` answer. */
  health(): Record<string, unknown>;
  /** The longest request line read. */
  maxRequestBytes: number;
  /** Called once, when the connection has closed. */
  closed(conn: Connection): void;
}

/** A client connection and the leases it holds. */
export class Connection {
  readonly #socket: net.Socket;
  readonly #host: ConnectionHost;
  readonly #leases = new Set<string>();
  #pending: Buffer[] = [];
  #pendingBytes = 0;
  #closed = false;
  #hungUp = false;
  #dropped = 0;

  /** Serves `socket` (already accepted and its peer checked). */
  constructor(socket: net.Socket, host: ConnectionHost) {
    this.#socket = socket;
    this.#host = host;
    socket.on('data', (chunk: Buffer) => this.#data(chunk));
    // Resets and broken pipes end the connection like a close does; they are not the daemon's failures.
    socket.on('error', () => {});
    socket.on('close', () => this.#close());
  }

  /** Leases this connection holds. */
  get leases(): number {
    return this.#leases.size;
  }

  /** Closes the connection now (its leases end). */
  destroy(): void {
    this.#socket.destroy();
  }

  #write(line: string): void {
    if (!this.#closed && this.#socket.writable) this.#socket.write(line);
  }

  #data(chunk: Buffer): void {
    if (this.#hungUp) {
      this.#dropped += chunk.length;
      if (this.#dropped > 64 * this.#host.maxRequestBytes) this.#socket.destroy();
      return;
    }
    let start = 0;
    for (let nl = chunk.indexOf(10, start); nl >= 0; nl = chunk.indexOf(10, start)) {
      const piece = chunk.subarray(start, nl);
      const line = this.#pendingBytes > 0 ? Buffer.concat([...this.#pending, piece]) : piece;
      this.#pending = [];
      this.#pendingBytes = 0;
      start = nl + 1;
      if (line.length > this.#host.maxRequestBytes) return this.#oversized();
      void this.#handle(line.toString('utf8'));
    }
    if (start < chunk.length) {
      this.#pending.push(chunk.subarray(start));
      this.#pendingBytes += chunk.length - start;
      if (this.#pendingBytes > this.#host.maxRequestBytes) this.#oversized();
    }
  }

  /**
   * A line past the limit cannot be answered by id, and reading on would mean buffering it: answer
   * and half-close. What the client still sends is read and dropped (closing with unread bytes
   * would reset the connection and could lose the answer), up to a bound.
   */
  #oversized(): void {
    this.#hungUp = true;
    this.#pending = [];
    this.#pendingBytes = 0;
    this.#write(errorLine(null, usage('ERR_PENSTOCK_SERVE_BAD_REQUEST', `A request line is longer than ${this.#host.maxRequestBytes} bytes; the connection is closed`)));
    this.#socket.end();
  }

  async #handle(line: string): Promise<void> {
    if (line.trim() === '') return;
    let req: ServeRequest;
    try {
      req = parseRequest(line);
    } catch (err) {
      this.#write(errorLine(requestIdOf(line), err));
      return;
    }
    try {
      this.#write(answerLine(req.id, await this.#answer(req)));
    } catch (err) {
      this.#write(errorLine(req.id, err));
    }
  }

  async #answer(req: ServeRequest): Promise<Record<string, unknown>> {
    const sets = this.#host.sets;
    switch (req.op) {
      case 'acquire': {
        const grant = await sets.acquire(req.set);
        if (this.#closed) {
          // The client went away while its set loaded: nobody will map it, so nothing is leased.
          sets.release(grant.lease);
          return {};
        }
        this.#leases.add(grant.lease);
        return { lease: grant.lease, key: grant.key, hit: grant.hit, manifest: grant.manifest };
      }
      case 'release':
        // Only this connection's leases: a client cannot end another's.
        if (!this.#leases.delete(req.lease)) throw usage('ERR_PENSTOCK_SERVE_UNKNOWN_LEASE', 'This connection holds no lease with that id');
        sets.release(req.lease);
        return {};
      case 'evict':
        if (req.all) return { evicted: sets.evictIdle() };
        return { evicted: [sets.evict(req.key!)] };
      case 'list':
        return { sets: sets.list() };
      case 'stats':
        return this.#host.stats();
      case 'health':
        return this.#host.health();
    }
  }

  #close(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const lease of this.#leases) this.#host.sets.release(lease);
    this.#leases.clear();
    this.#host.closed(this);
  }
}
