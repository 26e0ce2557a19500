/**
 * The program of a remote-read worker thread (`remoteWorkers` > 0), one of the process's, shared
 * by every remote object: told about an object (its requests, identity and settings) before its
 * first piece, it makes the ranged requests of the pieces it is sent on connections of its own
 * (per object, kept alive), checks and parses the answers on its own event loop, and puts the
 * bytes where they go: into the GPU (through the object's pinned slots in this worker and the
 * addon's host-to-device copy to the target's address) or into a SharedArrayBuffer target. Told
 * to forget an object, it closes the object's connections and frees its slots. Only plain data
 * crosses threads.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { native } from '../../addon/binding.js';
import { fromNative } from '../../vocabulary/errors.js';
import { PinnedBuffer } from '../../memory/pinned-buffer.js';
import { RemoteError } from './errors.js';
import { ConnectionPool, requestRange, type ObjectIdentity } from './http.js';
import { buildRequest, type RequestSpec } from './request-spec.js';
import { withRetries, type Attempts } from './retry.js';
import type { ResolvedRemoteSettings } from './settings.js';
import { StagingSlots } from './staging.js';
import type { AwsCredentials } from './credentials.js';
import type { ProxySettings } from './proxy.js';

/** What a worker is told about an object before its first piece. */
export interface WorkerInit {
  spec: RequestSpec;
  identity: ObjectIdentity;
  settings: ResolvedRemoteSettings;
  /** Connections (and pieces in flight) of the object in this worker. */
  connections: number;
  /** Extra certificates to trust for https://. */
  ca?: string;
  /** The proxies to go through (the main thread's). */
  proxy?: ProxySettings;
}

/** One piece to fetch: `[start, end)` of object `obj`, and where its bytes go. */
export type WorkerJob = { type: 'fetch'; obj: number; id: number; start: number; end: number; credentials?: AwsCredentials } & ({ into: 'device'; device: number; ptr: bigint } | { into: 'shared'; buffer: SharedArrayBuffer; offset: number });

/** What the main thread sends a worker. */
export type WorkerMessage = { type: 'open'; obj: number; init: WorkerInit } | WorkerJob | { type: 'cancel'; id: number } | { type: 'forget'; obj: number };

/** A worker's answer: for one piece, or that it has forgotten an object. */
export type WorkerReply =
  | { type: 'done'; id: number; counts: Attempts }
  | { type: 'error'; id: number; counts: Attempts; error: { name: string; code: string; message: string; status?: number; serverCode?: string; attempts?: number; region?: string } }
  | { type: 'forgotten'; obj: number };

/** An object as a worker holds it: what it was told, its connections and its pinned slots. */
interface Held {
  init: WorkerInit;
  pool: ConnectionPool;
  staging?: StagingSlots;
}

function run(): void {
  const port = parentPort!;
  const objects = new Map<number, Held>();
  const jobs = new Map<number, AbortController>();

  const fetchInto = async (o: Held, job: WorkerJob, view: Uint8Array, counts: Attempts, signal: AbortSignal) => {
    const { init } = o;
    const s = init.settings;
    const held = { received: 0 };
    let resumeAt = 0;
    await withRetries(
      () => requestRange(o.pool, buildRequest(init.spec, job.start, job.end), init.identity, (chunk, off) => view.set(chunk, off), { timeoutMs: s.remoteTimeoutMs, signal, resumeAt, progress: held }),
      { retries: s.remoteRetries, baseMs: s.remoteRetryBaseMs, signal, counts, onRetry: () => {
        resumeAt += held.received;
        held.received = 0;
      } },
    );
  };

  const handle = async (job: WorkerJob): Promise<WorkerReply> => {
    const ac = new AbortController();
    jobs.set(job.id, ac);
    const counts: Attempts = { requests: 0, retries: 0 };
    const len = job.end - job.start;
    try {
      const o = objects.get(job.obj);
      if (!o) throw new Error(`a piece of object ${job.obj}, which this worker was not told about`);
      // Credentials renewed on the main thread since the object was opened.
      if (job.credentials && o.init.spec.s3) o.init.spec.s3.credentials = job.credentials;
      if (job.into === 'device') {
        o.staging ??= new StagingSlots(o.init.settings.remoteRangeSize, o.init.connections + 2);
        const staging = o.staging;
        const slot = await staging.take();
        try {
          const view = slot.bytes.subarray(0, len);
          await fetchInto(o, job, view, counts, ac.signal);
          // The native copy itself, not DeviceBuffer.wrap: wrapping would prepare the GPU from
          // this thread's settings, and the process-wide pool and staging are the main thread's.
          try {
            await native().copyHostToDevice(job.device, job.ptr, slot.buffer, 0, len).promise;
          } catch (e) {
            throw fromNative(e);
          }
        } finally {
          staging.give(slot);
        }
        return { type: 'done', id: job.id, counts };
      }
      await fetchInto(o, job, new Uint8Array(job.buffer, job.offset, len), counts, ac.signal);
      return { type: 'done', id: job.id, counts };
    } catch (e) {
      const x = e as Error & { code?: string };
      const error: Extract<WorkerReply, { type: 'error' }>['error'] = { name: x.name, code: x.code ?? 'ERR_PENSTOCK_INTERNAL', message: x instanceof RemoteError ? x.baseMessage : x.message };
      if (x instanceof RemoteError) {
        for (const k of ['status', 'serverCode', 'attempts', 'region'] as const) if (x[k] !== undefined) (error as Record<string, unknown>)[k] = x[k];
      }
      return { type: 'error', id: job.id, counts, error };
    } finally {
      jobs.delete(job.id);
    }
  };

  port.on('message', (m: WorkerMessage) => {
    if (m.type === 'open') objects.set(m.obj, { init: m.init, pool: new ConnectionPool(m.init.connections, undefined, m.init.ca, m.init.proxy ?? {}) });
    else if (m.type === 'cancel') jobs.get(m.id)?.abort();
    else if (m.type === 'forget') {
      // Sent once the object's reads have settled, so none of its slots is in use.
      const o = objects.get(m.obj);
      objects.delete(m.obj);
      o?.pool.destroy();
      o?.staging?.free();
      port.postMessage({ type: 'forgotten', obj: m.obj } satisfies WorkerReply);
    } else void handle(m).then((reply) => port.postMessage(reply));
  });
}

const data = workerData as { penstockRemoteWorker?: boolean } | undefined;
if (parentPort && data?.penstockRemoteWorker) run();
