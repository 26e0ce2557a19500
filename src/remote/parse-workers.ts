/**
 * Remote reads with HTTP parsed in worker threads (`remoteWorkers` > 0): the main thread only
 * hands out pieces and collects answers; the workers (parse-worker-main.ts) make the requests,
 * check them and move the bytes, into the GPU themselves or into shared memory.
 */
import { Worker } from 'node:worker_threads';
import { DeviceBuffer } from '../device-buffer.js';
import { AbortError, PenstockError } from '../errors.js';
import { REMOTE_ERROR_CODES, RemoteError, type RemoteErrorCode } from './errors.js';
import type { WorkerInit, WorkerJob, WorkerReply } from './parse-worker-main.js';
import type { Attempts } from './retry.js';

/** Where a piece's bytes go. */
export type Destination = { into: 'device'; device: number; ptr: bigint } | { into: 'shared'; buffer: SharedArrayBuffer; offset: number };
type JobBody = { start: number; end: number } & Destination;

interface Pending {
  resolve: (r: Extract<WorkerReply, { type: 'done' }>) => void;
  reject: (e: Error) => void;
  counts: Attempts;
  worker: { w: Worker; busy: number };
}

/** A set of worker threads serving one remote object. */
export class ParseWorkers {
  readonly count: number;
  readonly #workers: { w: Worker; busy: number }[];
  readonly #pending = new Map<number, Pending>();
  readonly #name: string;
  #next = 1;

  constructor(count: number, init: Omit<WorkerInit, 'connections'>, name: string) {
    this.count = count;
    this.#name = name;
    const connections = Math.max(1, Math.ceil(init.settings.remoteConcurrency / count));
    this.#workers = Array.from({ length: count }, () => {
      const w = new Worker(new URL('./parse-worker-main.js', import.meta.url), { workerData: { penstockRemoteWorker: { ...init, connections } } });
      w.unref();
      const entry = { w, busy: 0 };
      w.on('message', (m: WorkerReply) => this.#settle(m));
      w.on('error', (e) => {
        for (const [id, p] of this.#pending) if (p.worker === entry) {
          this.#pending.delete(id);
          p.reject(new PenstockError('ERR_PENSTOCK_INTERNAL', `A remote-read worker thread failed: ${e.message}`));
        }
      });
      return entry;
    });
  }

  /** Runs one piece on the least busy worker; `counts` grows by its requests and retries. */
  run(job: JobBody, counts: Attempts, signal: AbortSignal): Promise<Extract<WorkerReply, { type: 'done' }>> {
    const worker = this.#workers.reduce((a, b) => (b.busy < a.busy ? b : a));
    const id = this.#next++;
    worker.busy++;
    return new Promise((resolve, reject) => {
      const onAbort = () => worker.w.postMessage({ type: 'cancel', id });
      signal.addEventListener('abort', onAbort, { once: true });
      const done = () => {
        worker.busy--;
        signal.removeEventListener('abort', onAbort);
      };
      this.#pending.set(id, {
        resolve: (r) => (done(), resolve(r)),
        reject: (e) => (done(), reject(e)),
        counts, worker,
      });
      worker.w.postMessage({ type: 'fetch', id, ...job } as WorkerJob);
    });
  }

  #settle(m: WorkerReply): void {
    const p = this.#pending.get(m.id);
    if (!p) return;
    this.#pending.delete(m.id);
    p.counts.requests += m.counts.requests;
    p.counts.retries += m.counts.retries;
    if (m.type === 'done') return p.resolve(m);
    const e = m.error;
    if (e.name === 'AbortError') return p.reject(new AbortError());
    if (Object.hasOwn(REMOTE_ERROR_CODES, e.code)) {
      const d = { url: this.#name, ...(e.status !== undefined ? { status: e.status } : {}), ...(e.serverCode ? { serverCode: e.serverCode } : {}), ...(e.attempts !== undefined ? { attempts: e.attempts } : {}), ...(e.region ? { region: e.region } : {}) };
      return p.reject(new RemoteError(e.code as RemoteErrorCode, e.message, d));
    }
    p.reject(new PenstockError(e.code, e.message));
  }

  /** Stops the workers (their connections and pinned slots go with them). */
  async close(): Promise<void> {
    await Promise.all(this.#workers.map((x) => x.w.terminate()));
  }
}

/** A piece's place in GPU memory, for the workers: the device and the address. */
export function intoDevice(target: DeviceBuffer, offset: number): Destination {
  return { into: 'device', device: target.device, ptr: target.ptr + BigInt(offset) };
}

/** A piece's place in shared host memory (`bytes` is a view penstock built itself, by regionBytes). */
export function intoShared(bytes: Uint8Array, at: number): Destination {
  return { into: 'shared', buffer: bytes.buffer as SharedArrayBuffer, offset: bytes.byteOffset + at };
}
