/**
 * The program of a remote-read worker thread (`remoteWorkers` > 0): it makes the ranged requests
 * of the pieces it is sent on its own kept-alive connections, checks and parses the answers on its
 * own event loop, and puts the bytes where they go: into the GPU (through its own pinned slots and
 * the addon's host-to-device copy to the target's address) or into a SharedArrayBuffer target.
 * Only plain data crosses threads.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { native } from '../binding.js';
import { fromNative } from '../errors.js';
import { PinnedBuffer } from '../pinned-buffer.js';
import { RemoteError } from './errors.js';
import { ConnectionPool, requestRange, type ObjectIdentity } from './http.js';
import { buildRequest, type RequestSpec } from './request-spec.js';
import { withRetries, type Attempts } from './retry.js';
import type { RemoteSettings } from './settings.js';
import { StagingSlots } from './staging.js';

/** What a worker is started with. */
export interface WorkerInit {
  spec: RequestSpec;
  identity: ObjectIdentity;
  settings: RemoteSettings;
  /** Connections (and pieces in flight) of this worker. */
  connections: number;
  /** Extra certificates to trust for https://. */
  ca?: string;
}

/** One piece to fetch: `[start, end)` of the object, and where its bytes go. */
export type WorkerJob = { type: 'fetch'; id: number; start: number; end: number } & ({ into: 'device'; device: number; ptr: bigint } | { into: 'shared'; buffer: SharedArrayBuffer; offset: number });

/** A worker's answer for one piece. */
export type WorkerReply =
  | { type: 'done'; id: number; counts: Attempts }
  | { type: 'error'; id: number; counts: Attempts; error: { name: string; code: string; message: string; status?: number; serverCode?: string; attempts?: number; region?: string } };

function run(init: WorkerInit): void {
  const port = parentPort!;
  const pool = new ConnectionPool(init.connections, undefined, init.ca);
  const s = init.settings;
  const jobs = new Map<number, AbortController>();
  let staging: StagingSlots | undefined;

  const fetchInto = async (job: WorkerJob, view: Uint8Array, counts: Attempts, signal: AbortSignal) => {
    const held = { received: 0 };
    let resumeAt = 0;
    await withRetries(
      () => requestRange(pool, buildRequest(init.spec, job.start, job.end), init.identity, (chunk, off) => view.set(chunk, off), { timeoutMs: s.remoteTimeoutMs, signal, resumeAt, progress: held }),
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
      if (job.into === 'device') {
        staging ??= new StagingSlots(s.remoteRangeSize, init.connections + 2);
        const slot = await staging.take();
        try {
          const view = slot.bytes.subarray(0, len);
          await fetchInto(job, view, counts, ac.signal);
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
      await fetchInto(job, new Uint8Array(job.buffer, job.offset, len), counts, ac.signal);
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

  port.on('message', (m: WorkerJob | { type: 'cancel'; id: number } | { type: 'close' }) => {
    if (m.type === 'cancel') jobs.get(m.id)?.abort();
    else if (m.type === 'close') {
      pool.destroy();
      staging?.free();
      port.close();
    } else {
      void handle(m).then((reply) => port.postMessage(reply));
    }
  });
}

const data = workerData as { penstockRemoteWorker?: WorkerInit } | undefined;
if (parentPort && data?.penstockRemoteWorker) run(data.penstockRemoteWorker);
