/**
 * The Node client of `penstock serve`: `connectServer(path)`, then `acquire(spec)` gives an
 * opened tensor set — views of the daemon's GPU memory, mapped here through CUDA IPC — held by a
 * lease until `release()` (or the end of an `await using` block, or this connection closing).
 */
import net from 'node:net';
import path from 'node:path';
import type { DeviceBuffer } from '../memory/device-buffer.js';
import { openTensorManifest, type ImportedTensorSet, type OpenedTensor, type TensorManifest } from '../ipc/manifest.js';
import type { IpcImportOptions } from '../ipc/handles.js';
import { checkOptionKeys } from '../settings/option-keys.js';
import { PenstockError, systemError, usage } from '../vocabulary/errors.js';
import { MAX_ANSWER_BYTES, SERVE_PROTOCOL_VERSION, type SetSpec } from './protocol.js';
import type { ResidentSetInfo } from './resident-sets.js';
import { defaultSocketPath } from './socket-path.js';

interface Waiter {
  resolve(body: Record<string, unknown>): void;
  reject(err: Error): void;
}

function answerError(e: unknown): PenstockError {
  const o = (e ?? {}) as { code?: unknown; message?: unknown };
  return new PenstockError(typeof o.code === 'string' ? o.code : 'ERR_PENSTOCK_INTERNAL', typeof o.message === 'string' ? o.message : 'the daemon gave an error without a message');
}

/** A tensor set served by the daemon, opened in this process, held by a lease. */
export class ServedTensorSet {
  /** The lease id. */
  readonly lease: string;
  /** The set's key in the daemon (`evict` takes it). */
  readonly key: string;
  /** Whether the daemon already held the set (no load was needed for this acquire). */
  readonly hit: boolean;
  /** The manifest the daemon handed over. */
  readonly manifest: Readonly<TensorManifest>;
  readonly #opened: ImportedTensorSet;
  readonly #client: ServeClient;
  #released: Promise<void> | undefined;

  readonly #forget: () => void;

  /** @internal Built by {@link ServeClient.acquire}. */
  constructor(client: ServeClient, body: { lease: string; key: string; hit: boolean; manifest: TensorManifest }, opened: ImportedTensorSet, forget: () => void) {
    this.#client = client;
    this.#forget = forget;
    this.lease = body.lease;
    this.key = body.key;
    this.hit = body.hit;
    this.manifest = body.manifest;
    this.#opened = opened;
  }

  /** The whole slab, mapped. */
  get slab(): DeviceBuffer {
    return this.#opened.slab;
  }

  /** The tensors by name, in manifest order; each `buffer` is a view of the mapping. */
  get tensors(): ReadonlyMap<string, OpenedTensor> {
    return this.#opened.tensors;
  }

  /** The manifest's string metadata. */
  get metadata(): Readonly<Record<string, string>> {
    return this.#opened.metadata;
  }

  /** The tensor called `name`, or undefined. */
  get(name: string): OpenedTensor | undefined {
    return this.#opened.get(name);
  }

  /** Whether `release()` has run. */
  get released(): boolean {
    return this.#released !== undefined;
  }

  /**
   * Unmaps the set here, then ends the lease (the daemon may then evict the set). Every buffer of
   * the set is freed first, so nothing here can touch memory the daemon frees. Idempotent.
   */
  release(): Promise<void> {
    return (this.#released ??= (async () => {
      this.#opened.close();
      this.#forget();
      if (this.#client.closed) return;
      try {
        await this.#client.request('release', { lease: this.lease });
      } catch (err) {
        // The connection closing ended the lease anyway.
        if ((err as { code?: string }).code !== 'ERR_PENSTOCK_SERVE_CLOSED') throw err;
      }
    })());
  }

  /** Releases at the end of an `await using` block (as `release()`). */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.release();
  }
}

/** A connection to a daemon. Closing it ends its leases (close the mappings first). */
export class ServeClient {
  readonly #socket: net.Socket;
  readonly #waiting = new Map<number, Waiter>();
  readonly #served = new Set<ServedTensorSet>();
  #nextId = 1;
  #pending: Buffer[] = [];
  #pendingBytes = 0;
  #closed = false;
  #failure: Error | undefined;

  /** @internal Built by {@link connectServer}. */
  constructor(socket: net.Socket) {
    this.#socket = socket;
    socket.on('data', (chunk: Buffer) => this.#data(chunk));
    socket.on('error', (err) => (this.#failure ??= systemError(err as NodeJS.ErrnoException)));
    socket.on('close', () => this.#close());
  }

  /** Whether the connection has closed. */
  get closed(): boolean {
    return this.#closed;
  }

  #data(chunk: Buffer): void {
    let start = 0;
    for (let nl = chunk.indexOf(10, start); nl >= 0; nl = chunk.indexOf(10, start)) {
      const line = Buffer.concat([...this.#pending, chunk.subarray(start, nl)]).toString('utf8');
      this.#pending = [];
      this.#pendingBytes = 0;
      start = nl + 1;
      this.#answer(line);
    }
    if (start < chunk.length) {
      this.#pending.push(chunk.subarray(start));
      this.#pendingBytes += chunk.length - start;
      if (this.#pendingBytes > MAX_ANSWER_BYTES) this.#fail(usage('ERR_PENSTOCK_SERVE_BAD_REQUEST', `An answer from the daemon is longer than ${MAX_ANSWER_BYTES} bytes`));
    }
  }

  #answer(line: string): void {
    let a: { v?: unknown; id?: unknown; ok?: unknown; error?: unknown };
    try {
      a = JSON.parse(line) as typeof a;
    } catch {
      return this.#fail(usage('ERR_PENSTOCK_SERVE_BAD_REQUEST', 'The daemon sent a line that is not JSON'));
    }
    if (a?.v !== SERVE_PROTOCOL_VERSION) return this.#fail(usage('ERR_PENSTOCK_SERVE_VERSION', `The daemon speaks protocol version ${String(a?.v)}, this client ${SERVE_PROTOCOL_VERSION}`));
    if (a.id === null) {
      // An answer to no request: the daemon refusing this connection, or a line it could not read.
      if (a.ok === false) this.#failure = answerError(a.error);
      return;
    }
    const w = typeof a.id === 'number' ? this.#waiting.get(a.id) : undefined;
    if (!w) return;
    this.#waiting.delete(a.id as number);
    if (a.ok === true) w.resolve(a as Record<string, unknown>);
    else w.reject(answerError(a.error));
  }

  #fail(err: Error): void {
    this.#failure = err;
    this.#socket.destroy();
  }

  #close(): void {
    this.#closed = true;
    const err = this.#failure ?? usage('ERR_PENSTOCK_SERVE_CLOSED', 'The connection to the daemon closed before it answered');
    for (const w of this.#waiting.values()) w.reject(err);
    this.#waiting.clear();
  }

  /** Sends one request (`op` and its fields) and resolves with the answer's body. */
  request(op: string, fields: Record<string, unknown> = {}): Promise<Record<string, unknown>> {
    if (this.#closed) return Promise.reject(this.#failure ?? usage('ERR_PENSTOCK_SERVE_CLOSED', 'The connection to the daemon is closed'));
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      this.#waiting.set(id, { resolve, reject });
      this.#socket.write(`${JSON.stringify({ ...fields, v: SERVE_PROTOCOL_VERSION, id, op })}\n`);
    });
  }

  /**
   * Asks the daemon for a set (loading it there first if needed) and maps it here. Relative
   * local paths are resolved against this process's working folder.
   */
  async acquire(spec: SetSpec, options: IpcImportOptions = {}): Promise<ServedTensorSet> {
    checkOptionKeys('openTensorManifest', options, 'acquire()');
    const paths = spec && typeof spec === 'object' ? spec.path : undefined;
    const absolute = (p: unknown) => (typeof p === 'string' && p !== '' && !/^(s3|https?):\/\//i.test(p) ? path.resolve(p) : p);
    const set = { ...spec, path: Array.isArray(paths) ? paths.map(absolute) : absolute(paths) };
    const body = (await this.request('acquire', { set })) as { lease: string; key: string; hit: boolean; manifest: TensorManifest };
    let opened: ImportedTensorSet;
    try {
      opened = openTensorManifest(body.manifest, options);
    } catch (err) {
      await this.request('release', { lease: body.lease }).catch(() => {});
      throw err;
    }
    const served: ServedTensorSet = new ServedTensorSet(this, body, opened, () => this.#served.delete(served));
    this.#served.add(served);
    return served;
  }

  /** The daemon's sets, most recently used first. */
  async list(): Promise<ResidentSetInfo[]> {
    return (await this.request('list')).sets as ResidentSetInfo[];
  }

  /** Evicts the set under `key` (refused while anyone holds it); returns the keys evicted. */
  async evict(key: string): Promise<string[]> {
    return (await this.request('evict', { key })).evicted as string[];
  }

  /** Evicts every set nobody holds; returns their keys. */
  async evictIdle(): Promise<string[]> {
    return (await this.request('evict', { all: true })).evicted as string[];
  }

  /** The daemon's totals, counters and per-GPU memory. */
  async stats(): Promise<Record<string, unknown>> {
    return strip(await this.request('stats'));
  }

  /** The daemon's pid, version and protocol. */
  async health(): Promise<Record<string, unknown>> {
    return strip(await this.request('health'));
  }

  /** Unmaps every set acquired through this connection, then closes it (the daemon ends the leases). */
  async close(): Promise<void> {
    for (const s of this.#served) if (!s.released) void s.release().catch(() => {});
    if (this.#closed) return;
    await new Promise<void>((resolve) => {
      this.#socket.once('close', () => resolve());
      this.#socket.end();
    });
  }

  /** Closes at the end of an `await using` block (as `close()`). */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}

function strip(body: Record<string, unknown>): Record<string, unknown> {
  const { v: _v, id: _id, ok: _ok, ...rest } = body;
  return rest;
}

/** Connects to a daemon (default socket: {@link defaultSocketPath}) and checks that it answers. */
export async function connectServer(socketPath: string = defaultSocketPath()): Promise<ServeClient> {
  if (typeof socketPath !== 'string' || socketPath === '') throw usage('ERR_PENSTOCK_INVALID_ARGUMENT', 'connectServer needs a socket path');
  const socket = await new Promise<net.Socket>((resolve, reject) => {
    const s = net.connect(socketPath);
    s.once('connect', () => {
      s.removeAllListeners('error');
      resolve(s);
    });
    s.once('error', (err) => reject(systemError(err as NodeJS.ErrnoException)));
  });
  const client = new ServeClient(socket);
  try {
    await client.health();
  } catch (err) {
    socket.destroy();
    throw err;
  }
  return client;
}
