/**
 * The worker-thread alternative measured by `npm run bench:remote`: each worker runs its own
 * event loop and keep-alive connections, parses HTTP there and writes bodies into a
 * SharedArrayBuffer target, so the main thread does none of it. Not used by penstock's reads;
 * it is here to decide, from numbers, where HTTP parsing should run.
 */
import http from 'node:http';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';

interface Job {
  url: string;
  /** [start, end) ranges this worker fetches. */
  ranges: [number, number][];
  connections: number;
  target: SharedArrayBuffer;
}

function fetchRanges(job: Job): Promise<number> {
  const url = new URL(job.url);
  const agent = new http.Agent({ keepAlive: true, maxSockets: job.connections });
  const bytes = new Uint8Array(job.target);
  let next = 0;
  let total = 0;
  const one = ([start, end]: [number, number]) =>
    new Promise<void>((resolve, reject) => {
      const req = http.get({ agent, hostname: url.hostname, port: url.port, path: url.pathname, headers: { Range: `bytes=${start}-${end - 1}` } }, (res) => {
        if (res.statusCode !== 206) return reject(new Error(`status ${res.statusCode}`));
        let at = start;
        res.on('data', (c: Buffer) => {
          bytes.set(c, at);
          at += c.length;
        });
        res.on('end', () => (at === end ? resolve() : reject(new Error('short body'))));
        res.on('error', reject);
      });
      req.on('error', reject);
    }).then(() => {
      total += end - start;
    });
  const loop = async () => {
    while (next < job.ranges.length) await one(job.ranges[next++]!);
  };
  return Promise.all(Array.from({ length: job.connections }, loop)).then(() => {
    agent.destroy();
    return total;
  });
}

/** Workers kept for repeated reads. */
export class WorkerReaders {
  readonly #workers: Worker[];

  constructor(count: number) {
    this.#workers = Array.from({ length: count }, () => new Worker(new URL(import.meta.url), { workerData: { worker: true } }));
  }

  /** Reads `size` bytes of `url` into `target` with `connections` in flight spread over the workers. */
  async read(url: string, target: SharedArrayBuffer, size: number, rangeSize: number, connections: number): Promise<number> {
    const n = this.#workers.length;
    const per: [number, number][][] = Array.from({ length: n }, () => []);
    for (let at = 0, i = 0; at < size; at += rangeSize, i++) per[i % n]!.push([at, Math.min(size, at + rangeSize)]);
    const each = Math.max(1, Math.round(connections / n));
    const done = await Promise.all(
      this.#workers.map(
        (w, i) =>
          new Promise<number>((resolve, reject) => {
            w.once('message', (m: { bytes?: number; error?: string }) => (m.error ? reject(new Error(m.error)) : resolve(m.bytes!)));
            w.postMessage({ url, ranges: per[i]!, connections: each, target } satisfies Job);
          }),
      ),
    );
    return done.reduce((a, b) => a + b, 0);
  }

  async close(): Promise<void> {
    await Promise.all(this.#workers.map((w) => w.terminate()));
  }
}

if (!isMainThread && (workerData as { worker?: boolean })?.worker) {
  parentPort!.on('message', (job: Job) => {
    fetchRanges(job).then(
      (bytes) => parentPort!.postMessage({ bytes }),
      (e: Error) => parentPort!.postMessage({ error: e.message }),
    );
  });
}
