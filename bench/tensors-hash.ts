/**
 * sha256 of every tensor on worker threads, for `bench:tensors`: from a file's bytes (plain `fs`
 * reads, the reference) and from bytes copied back out of GPU memory (the check). One thread
 * hashes at 1–2 GB/s, far below a load, so a serial check would cost more than the bench's runs.
 * The same module is the worker (started with workerData.penstockHashWorker).
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';

type Request =
  | { op: 'file'; id: number; path: string; offset: number; length: number }
  | { op: 'update'; id: number; buf: ArrayBuffer; offset: number; length: number }
  | { op: 'digest'; id: number };

if (!isMainThread && (workerData as { penstockHashWorker?: boolean } | undefined)?.penstockHashWorker) {
  const open = new Map<number, crypto.Hash>();
  const piece = Buffer.allocUnsafeSlow(16 << 20);
  parentPort!.on('message', (m: Request) => {
    try {
      if (m.op === 'file') {
        const h = crypto.createHash('sha256');
        const fd = fs.openSync(m.path, 'r');
        try {
          for (let done = 0; done < m.length; ) {
            const n = fs.readSync(fd, piece, 0, Math.min(piece.length, m.length - done), m.offset + done);
            if (n === 0) throw new Error(`${m.path}: file ends before ${m.offset + m.length}`);
            h.update(piece.subarray(0, n));
            done += n;
          }
        } finally {
          fs.closeSync(fd);
        }
        parentPort!.postMessage({ id: m.id, hex: h.digest('hex') });
      } else if (m.op === 'update') {
        let h = open.get(m.id);
        if (!h) open.set(m.id, (h = crypto.createHash('sha256')));
        h.update(new Uint8Array(m.buf, m.offset, m.length));
      } else {
        const h = open.get(m.id) ?? crypto.createHash('sha256');
        open.delete(m.id);
        parentPort!.postMessage({ id: m.id, hex: h.digest('hex') });
      }
    } catch (err) {
      parentPort!.postMessage({ id: m.id, error: (err as Error).message });
    }
  });
}

interface Pending {
  resolve: (hex: string) => void;
  reject: (e: Error) => void;
  worker: number;
  bytes: number;
}

/** A pool of hashing threads; each job goes to the thread with the fewest bytes queued. */
export class HashPool {
  private readonly workers: Worker[];
  private readonly queued: number[];
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;

  constructor(threads = Math.min(16, os.availableParallelism())) {
    this.workers = Array.from({ length: Math.max(1, threads) }, () => new Worker(new URL(import.meta.url), { workerData: { penstockHashWorker: true } }));
    this.queued = this.workers.map(() => 0);
    this.workers.forEach((w) => {
      w.on('message', (m: { id: number; hex?: string; error?: string }) => {
        const p = this.pending.get(m.id);
        if (!p) return;
        this.pending.delete(m.id);
        this.queued[p.worker]! -= p.bytes;
        if (m.error !== undefined) p.reject(new Error(m.error));
        else p.resolve(m.hex!);
      });
      w.on('error', (e) => {
        for (const p of this.pending.values()) p.reject(e);
        this.pending.clear();
      });
    });
  }

  private pick(): number {
    let best = 0;
    for (let i = 1; i < this.queued.length; i++) if (this.queued[i]! < this.queued[best]!) best = i;
    return best;
  }

  private track(worker: number, bytes: number): { id: number; done: Promise<string> } {
    const id = this.nextId++;
    this.queued[worker]! += bytes;
    const done = new Promise<string>((resolve, reject) => this.pending.set(id, { resolve, reject, worker, bytes }));
    return { id, done };
  }

  /** Bytes handed to the threads and not hashed yet. */
  get backlog(): number {
    return this.queued.reduce((a, b) => a + b, 0);
  }

  /** sha256 of `length` bytes of `path` at `offset`, read with plain fs calls. */
  fileRange(path: string, offset: number, length: number): Promise<string> {
    const w = this.pick();
    const { id, done } = this.track(w, length);
    this.workers[w]!.postMessage({ op: 'file', id, path, offset, length } satisfies Request);
    return done;
  }

  /** A streaming hash on one thread: `update` hands the buffer over (it is unusable afterwards). */
  stream(totalBytes: number): { update: (b: Buffer) => void; digest: () => Promise<string> } {
    const w = this.pick();
    const { id, done } = this.track(w, totalBytes);
    const worker = this.workers[w]!;
    return {
      update: (b: Buffer) => {
        // A pooled Buffer shares its ArrayBuffer with others: only whole, unshared ones move.
        const own = b.byteOffset === 0 && b.byteLength === b.buffer.byteLength ? b : Buffer.from(b);
        const ab = own.buffer as ArrayBuffer;
        worker.postMessage({ op: 'update', id, buf: ab, offset: 0, length: own.byteLength } satisfies Request, [ab]);
      },
      digest: () => {
        worker.postMessage({ op: 'digest', id } satisfies Request);
        return done;
      },
    };
  }

  async close(): Promise<void> {
    await Promise.all(this.workers.map((w) => w.terminate()));
  }
}

/** Tensors of a safetensors file: name → [absolute offset, length]. */
export function safetensorsSpans(path: string): Map<string, [number, number]> {
  const fd = fs.openSync(path, 'r');
  try {
    const head = Buffer.alloc(8);
    fs.readSync(fd, head, 0, 8, 0);
    const n = Number(head.readBigUInt64LE(0));
    if (n > 1 << 30) throw new Error(`${path}: header of ${n} bytes`);
    const json = Buffer.alloc(n);
    fs.readSync(fd, json, 0, n, 8);
    const hdr = JSON.parse(json.toString('utf8')) as Record<string, { data_offsets?: [number, number] }>;
    const out = new Map<string, [number, number]>();
    for (const [k, v] of Object.entries(hdr)) if (k !== '__metadata__' && v.data_offsets) out.set(k, [8 + n + v.data_offsets[0], v.data_offsets[1] - v.data_offsets[0]]);
    return out;
  } finally {
    fs.closeSync(fd);
  }
}

/** `{ name: sha256 }` of every tensor of a safetensors file, from its bytes. */
export async function fileTensorHashes(path: string, pool: HashPool): Promise<Record<string, string>> {
  const spans = [...safetensorsSpans(path)].sort((a, b) => b[1][1] - a[1][1]);
  const hexes = await Promise.all(spans.map(([, [off, len]]) => pool.fileRange(path, off, len)));
  const out: Record<string, string> = {};
  spans.forEach(([name], i) => (out[name] = hexes[i]!));
  return Object.fromEntries(Object.entries(out).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

/** Compares hashes with a reference: counts, and the first names that differ. */
export function compareHashes(got: Record<string, string>, ref: Record<string, string>): { compared: number; mismatched: number; missing: number; firstBad: string[] } {
  const bad = Object.keys(got).filter((k) => ref[k] !== got[k]);
  const missing = Object.keys(ref).filter((k) => !(k in got));
  return { compared: Object.keys(got).length, mismatched: bad.length, missing: missing.length, firstBad: [...bad, ...missing].slice(0, 5) };
}
