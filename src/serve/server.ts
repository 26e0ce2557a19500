/**
 * `penstock serve` as a library: a daemon that keeps tensor sets resident in GPU memory and hands
 * them to other processes over a Unix domain socket (protocol.ts), each peer checked by the
 * credentials the kernel recorded for its connection.
 */
import fs from 'node:fs';
import net from 'node:net';
import { native } from '../addon/binding.js';
import { deviceCount, requireCuda } from '../addon/runtime.js';
import { memoryInfo } from '../engine/process.js';
import { liveIpcExports } from '../ipc/handles.js';
import { checkOptionKeys } from '../settings/option-keys.js';
import { systemError, usage } from '../vocabulary/errors.js';
import { describe } from '../vocabulary/validate.js';
import { Connection, type ConnectionHost } from './connection.js';
import { errorLine, MAX_REQUEST_BYTES, normalizeSpec, SERVE_PROTOCOL_VERSION, type SetSpec } from './protocol.js';
import { ResidentSets, type ServeBudget } from './resident-sets.js';
import { claimSocketPath, prepareSocketDir } from './socket-path.js';

/** Options of {@link startServer}. */
export interface ServeOptions {
  /** The socket path; its folder is made (0700) when missing, and must be this user's alone. */
  socket: string;
  /** GPU memory the resident sets may fill on each GPU (default 90% of each GPU's memory). */
  budget?: ServeBudget;
  /** Sets to load before serving (held like any other: evictable once the budget needs room). */
  preload?: SetSpec[];
  /**
   * User ids besides this process's own that may connect. Their processes must reach the
   * socket, so with any listed the folder may be enterable (never writable) by others.
   */
  allowUids?: number[];
  /** The longest request line read (default 1 MiB). */
  maxRequestBytes?: number;
  /** Told of each event worth a log line (a load, a refused peer). */
  log?: (line: string) => void;
}

/** The process at the other end of a connection. */
interface Peer {
  pid: number;
  uid: number;
}

function peerOf(socket: net.Socket): Peer | undefined {
  // Node keeps the accepted descriptor on the socket's handle; without it the peer is unknown.
  const fd = (socket as unknown as { _handle?: { fd?: unknown } })._handle?.fd;
  if (typeof fd !== 'number' || fd < 0) return undefined;
  try {
    return native().peerCredentials(fd);
  } catch {
    return undefined;
  }
}

function packageVersion(): string {
  try {
    return (JSON.parse(fs.readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version: string }).version;
  } catch {
    return 'unknown';
  }
}

/** A running daemon. */
export class ServeDaemon {
  /** Where it listens. */
  readonly socketPath: string;
  /** Its resident sets. */
  readonly sets: ResidentSets;
  readonly #server: net.Server;
  readonly #connections = new Set<Connection>();
  readonly #allowed: Set<number>;
  readonly #log: (line: string) => void;
  readonly #started = performance.now();
  readonly #inode: number;
  #closing: Promise<void> | undefined;
  /** Connections refused for their user. */
  refusedPeers = 0;

  /** @internal Built by {@link startServer}. */
  constructor(server: net.Server, socketPath: string, sets: ResidentSets, allowed: Set<number>, maxRequestBytes: number, log: (line: string) => void) {
    this.#server = server;
    this.socketPath = socketPath;
    this.sets = sets;
    this.#allowed = allowed;
    this.#log = log;
    this.#inode = fs.statSync(socketPath).ino;
    const host: ConnectionHost = {
      sets,
      stats: () => this.stats(),
      health: () => this.health(),
      maxRequestBytes,
      closed: (c) => this.#connections.delete(c),
    };
    server.on('connection', (socket) => {
      const peer = peerOf(socket);
      if (!peer || !this.#allowed.has(peer.uid)) {
        this.refusedPeers++;
        this.#log(`refused a connection from ${peer ? `pid ${peer.pid}, uid ${peer.uid}` : 'a peer whose credentials could not be read'}`);
        socket.on('error', () => {});
        socket.end(errorLine(null, usage('ERR_PENSTOCK_SERVE_PEER_REFUSED', `This daemon serves uid ${[...this.#allowed].join(', ')}; the connecting process ${peer ? `runs as uid ${peer.uid}` : 'could not be identified'}`)));
        return;
      }
      this.#connections.add(new Connection(socket, host));
    });
  }

  /** The body of a `health` answer. */
  health(): Record<string, unknown> {
    return { pid: process.pid, version: packageVersion(), protocol: SERVE_PROTOCOL_VERSION, uptimeSeconds: (performance.now() - this.#started) / 1e3 };
  }

  /** The body of a `stats` answer: the sets' totals, the counters, and each GPU's memory. */
  stats(): Record<string, unknown> {
    const held = this.sets.bytesByDevice();
    const devices = [];
    // GPU 0 and those sets were loaded on: asking another GPU would make a CUDA context there.
    const count = deviceCount();
    for (const d of [...new Set([0, ...this.sets.devicesUsed])].filter((x) => x < count).sort((a, b) => a - b)) {
      const m = memoryInfo(d);
      devices.push({ device: d, free: m.free, total: m.total, budget: this.sets.budgetBytes(d), held: held.get(d) ?? 0 });
    }
    const list = this.sets.list();
    return {
      sets: list.length,
      residentBytes: list.reduce((a, s) => a + s.bytes, 0),
      leases: this.sets.leaseCount,
      connections: this.#connections.size,
      refusedPeers: this.refusedPeers,
      exports: liveIpcExports(),
      ...this.sets.counters,
      devices,
    };
  }

  /** Live client connections. */
  get connections(): number {
    return this.#connections.size;
  }

  /**
   * Stops: no new connections, every connection closed, every set freed, the socket file removed
   * (when it is still this daemon's). Idempotent.
   */
  close(): Promise<void> {
    return (this.#closing ??= (async () => {
      const closed = new Promise<void>((resolve) => this.#server.close(() => resolve()));
      for (const c of this.#connections) c.destroy();
      await closed;
      await this.sets.dispose();
      this.removeSocket();
    })());
  }

  /**
   * Removes the socket file now, when it is still this daemon's (another daemon may have taken
   * the path over since), synchronously: for a process about to exit, whose memory goes with it.
   */
  removeSocket(): void {
    try {
      if (fs.statSync(this.socketPath).ino === this.#inode) fs.unlinkSync(this.socketPath);
    } catch {
      // already gone
    }
  }

  /** Stops at the end of an `await using` block (as `close()`). */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}

function checkBudget(b: unknown): ServeBudget {
  const o = b as Record<string, unknown>;
  if (o && typeof o === 'object' && typeof o.bytes === 'number' && Number.isSafeInteger(o.bytes) && o.bytes > 0) return { bytes: o.bytes };
  if (o && typeof o === 'object' && typeof o.percent === 'number' && o.percent > 0 && o.percent <= 100) return { percent: o.percent };
  throw usage('ERR_PENSTOCK_INVALID_ARGUMENT', `budget must be { bytes } (a positive integer) or { percent } (0 < percent <= 100), got ${describe(b)}`);
}

/**
 * Starts a daemon on `options.socket`: checks the folder, refuses a path another daemon serves,
 * binds (socket file 0600), loads the preloads, and serves until `close()`.
 */
export async function startServer(options: ServeOptions): Promise<ServeDaemon> {
  checkOptionKeys('startServer', options);
  if (!options || typeof options.socket !== 'string' || options.socket.length === 0)
    throw usage('ERR_PENSTOCK_INVALID_ARGUMENT', 'startServer needs { socket: path }');
  const budget = checkBudget(options.budget ?? { percent: 90 });
  const allowed = new Set<number>([process.getuid?.() ?? 0]);
  for (const uid of options.allowUids ?? []) {
    if (!Number.isSafeInteger(uid) || uid < 0) throw usage('ERR_PENSTOCK_INVALID_ARGUMENT', `allowUids must hold user ids, got ${describe(uid)}`);
    allowed.add(uid);
  }
  const preload = (options.preload ?? []).map((s) => normalizeSpec(s));
  const maxRequestBytes = options.maxRequestBytes ?? MAX_REQUEST_BYTES;
  requireCuda();
  prepareSocketDir(options.socket, allowed.size > 1);
  await claimSocketPath(options.socket);
  const server = net.createServer({ pauseOnConnect: false });
  await new Promise<void>((resolve, reject) => {
    server.once('error', (err) => reject(systemError(err as NodeJS.ErrnoException)));
    server.listen(options.socket, () => resolve());
  });
  // The folder keeps others out while the mode is set. Alone, the socket file is 0600; when other
  // users are served, the folder decides who reaches it and the peer check who is answered.
  fs.chmodSync(options.socket, allowed.size > 1 ? 0o666 : 0o600);
  server.on('error', () => {});
  const log = options.log ?? (() => {});
  const daemon = new ServeDaemon(server, options.socket, new ResidentSets(budget, log), allowed, maxRequestBytes, log);
  try {
    for (const spec of preload) daemon.sets.release((await daemon.sets.acquire(spec)).lease);
  } catch (err) {
    await daemon.close();
    throw err;
  }
  return daemon;
}
