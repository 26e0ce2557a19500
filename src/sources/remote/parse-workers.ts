/**
 * Remote reads with HTTP parsed in worker threads (`remoteWorkers` > 0): the main thread only
 * hands out pieces and collects answers; the workers (parse-worker-main.ts) make the requests,
 * check them and move the bytes, into the GPU themselves or into shared memory.
 *
 * The workers are the process's, shared by every remote object: started when a read first needs
 * them, grown to the largest count an object asks for, kept (without holding the process open)
 * for the next object. An object tells a worker about itself (its requests, identity and
 * settings) before the worker's first piece of it, and forgets itself in each when closed.
 */
import { Worker } from 'node:worker_threads';
import type { DeviceBuffer } from '../../memory/device-buffer.js';
import { AbortError, PenstockError } from '../../vocabulary/errors.js';
import { REMOTE_ERROR_CODES, RemoteError, type RemoteErrorCode } from './errors.js';
import type { WorkerInit, WorkerMessage, WorkerReply } from './parse-worker-main.js';
import type { Attempts } from './retry.js';
import type { AwsCredentials } from './credentials.js';

/** Where a piece's bytes go. */
export type Destination = { into: 'device'; device: number; ptr: bigint } | { into: 'shared'; buffer: SharedArrayBuffer; offset: number };
type JobBody = { start: number; end: number; credentials?: AwsCredentials } & Destination;
type Done = Extract<WorkerReply, { type: 'done' }>;

interface Entry {
  w: Worker;
  /** Pieces in flight on it. */
  busy: number;
  /** Objects it has been told about. */
  known: Set<number>;
  alive: boolean;
}

interface Pending {
  resolve: (r: Done) => void;
  reject: (e: Error) => void;
  counts: Attempts;
  entry: Entry;
  name: string;
}

/** The process's worker threads for remote reads. */
class WorkerPool {
  readonly #entries: Entry[] = [];
  readonly #pending = new Map<number, Pending>();
  /** Objects being forgotten: the workers yet to answer, and who waits for them all. */
  readonly #forgetting = new Map<number, { waiting: Set<Entry>; done: () => void }>();
  #nextJob = 1;

  /** Worker threads started and not failed. */
  get size(): number {
    return this.#entries.length;
  }

  /** The first `count` workers, starting those missing. */
  take(count: number): Entry[] {
    while (this.#entries.length < count) this.#entries.push(this.#start());
    return this.#entries.slice(0, count);
  }

  #start(): Entry {
    const w = new Worker(new URL('./parse-worker-main.js', import.meta.url), { workerData: { penstockRemoteWorker: true } });
    // Idle workers do not keep the process alive; one with pieces in flight does (run()).
    w.unref();
    const entry: Entry = { w, busy: 0, known: new Set(), alive: true };
    w.on('message', (m: WorkerReply) => this.#settle(entry, m));
    const gone = (why: string) => {
      if (!entry.alive) return;
      entry.alive = false;
      const i = this.#entries.indexOf(entry);
      if (i >= 0) this.#entries.splice(i, 1);
      for (const [id, p] of this.#pending) if (p.entry === entry) {
        this.#pending.delete(id);
        p.reject(new PenstockError('ERR_PENSTOCK_INTERNAL', `A remote-read worker thread failed: ${why}`));
      }
      for (const obj of [...this.#forgetting.keys()]) this.#forgotten(entry, obj);
    };
    w.on('error', (e) => gone(e.message));
    w.on('exit', (code) => gone(`it exited (${code})`));
    return entry;
  }

  /** Runs one piece of object `obj` on `entry`, telling it about the object first if need be. */
  run(entry: Entry, obj: number, init: () => WorkerInit, job: JobBody, counts: Attempts, signal: AbortSignal, name: string): Promise<Done> {
    const id = this.#nextJob++;
    if (!entry.known.has(obj)) {
      entry.known.add(obj);
      this.#post(entry, { type: 'open', obj, init: init() });
    }
    if (entry.busy++ === 0) entry.w.ref();
    return new Promise((resolve, reject) => {
      const onAbort = () => this.#post(entry, { type: 'cancel', id });
      signal.addEventListener('abort', onAbort, { once: true });
      const done = () => {
        if (--entry.busy === 0) entry.w.unref();
        signal.removeEventListener('abort', onAbort);
      };
      this.#pending.set(id, { resolve: (r) => (done(), resolve(r)), reject: (e) => (done(), reject(e)), counts, entry, name });
      this.#post(entry, { type: 'fetch', obj, id, ...job });
    });
  }

  /** Tells every worker that knows object `obj` to forget it; resolves once each has (its connections and pinned slots freed). */
  forget(obj: number): Promise<void> {
    const knowing = this.#entries.filter((e) => e.known.has(obj));
    if (knowing.length === 0) return Promise.resolve();
    return new Promise((done) => {
      this.#forgetting.set(obj, { waiting: new Set(knowing), done });
      for (const e of knowing) {
        e.known.delete(obj);
        // Held open until it answers, so the answer is awaited even where nothing else runs.
        if (e.busy++ === 0) e.w.ref();
        this.#post(e, { type: 'forget', obj });
      }
    });
  }

  #post(entry: Entry, m: WorkerMessage): void {
    if (entry.alive) entry.w.postMessage(m);
  }

  /** `entry` has forgotten `obj` (or is gone). */
  #forgotten(entry: Entry, obj: number): void {
    const f = this.#forgetting.get(obj);
    if (!f?.waiting.delete(entry)) return;
    if (f.waiting.size === 0) {
      this.#forgetting.delete(obj);
      f.done();
    }
  }

  #settle(entry: Entry, m: WorkerReply): void {
    if (m.type === 'forgotten') {
      if (--entry.busy === 0) entry.w.unref();
      return this.#forgotten(entry, m.obj);
    }
    const p = this.#pending.get(m.id);
    if (!p) return;
    this.#pending.delete(m.id);
    p.counts.requests += m.counts.requests;
    p.counts.retries += m.counts.retries;
    if (m.type === 'done') return p.resolve(m);
    const e = m.error;
    if (e.name === 'AbortError') return p.reject(new AbortError());
    if (Object.hasOwn(REMOTE_ERROR_CODES, e.code)) {
      const d = { url: p.name, ...(e.status !== undefined ? { status: e.status } : {}), ...(e.serverCode ? { serverCode: e.serverCode } : {}), ...(e.attempts !== undefined ? { attempts: e.attempts } : {}), ...(e.region ? { region: e.region } : {}) };
      return p.reject(new RemoteError(e.code as RemoteErrorCode, e.message, d));
    }
    p.reject(new PenstockError(e.code, e.message));
  }
}

let pool: WorkerPool | undefined;
let nextObject = 1;
/** An object collected without close(): the workers forget it then. */
const collected = new FinalizationRegistry<number>((obj) => void pool?.forget(obj));

/** One remote object's use of the process's worker threads. */
export class ParseWorkers {
  readonly count: number;
  readonly #obj = nextObject++;
  readonly #init: Omit<WorkerInit, 'connections'>;
  readonly #name: string;
  #used = false;

  constructor(count: number, init: Omit<WorkerInit, 'connections'>, name: string) {
    this.count = count;
    this.#init = init;
    this.#name = name;
    collected.register(this, this.#obj, this);
  }

  /** Runs one piece on the least busy of this object's workers; `counts` grows by its requests and retries. */
  run(job: JobBody, counts: Attempts, signal: AbortSignal): Promise<Done> {
    pool ??= new WorkerPool();
    this.#used = true;
    const entries = pool.take(this.count);
    const entry = entries.reduce((a, b) => (b.busy < a.busy ? b : a));
    // Each worker gets its share of the object's connections (and pieces in flight).
    const init = () => ({ ...this.#init, connections: Math.max(1, Math.ceil(this.#init.settings.remoteConcurrency / this.count)) });
    // The credentials of the moment travel with each piece (they are renewed as they near expiry).
    const s3 = this.#init.spec.s3;
    return pool.run(entry, this.#obj, init, s3 ? { ...job, credentials: s3.credentials } : job, counts, signal, this.#name);
  }

  /** Makes the workers forget this object (its connections and pinned slots in them go). */
  async close(): Promise<void> {
    collected.unregister(this);
    if (this.#used && pool) await pool.forget(this.#obj);
  }
}

/** Worker threads the process has started for remote reads (they are shared by every object). */
export function remoteWorkerThreads(): number {
  return pool?.size ?? 0;
}

/** A piece's place in GPU memory, for the workers: the device and the address. */
export function intoDevice(target: DeviceBuffer, offset: number): Destination {
  return { into: 'device', device: target.device, ptr: target.ptr + BigInt(offset) };
}

/** A piece's place in shared host memory (`bytes` is a view penstock built itself, by regionBytes). */
export function intoShared(bytes: Uint8Array, at: number): Destination {
  return { into: 'shared', buffer: bytes.buffer as SharedArrayBuffer, offset: bytes.byteOffset + at };
}
