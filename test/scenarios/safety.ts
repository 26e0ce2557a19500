/**
 * Child-process scenarios for test/memory/safety-processes.test.ts: `node safety.js <name> <file>`.
 * Each prints one JSON line as its last output. Worker threads run this same file with a
 * worker scenario's name. Without a name (the test runner finding this file in dist/test) it
 * does nothing.
 */
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';

const p = { ...(await import('../../src/index.js')), ...(await import('../../src/doctor.js')) };
const [name, file] = isMainThread ? [process.argv[2], process.argv[3]] : [workerData.name as string, workerData.file as string];

function report(value: unknown): void {
  console.log(JSON.stringify(value));
}

/** Starts this file as a worker running scenario `worker`; resolves with it once it posts 'go'. */
function worker(workerName: string, extra: Record<string, unknown> = {}): Promise<Worker> {
  const w = new Worker(new URL(import.meta.url), { workerData: { name: workerName, file, ...extra } });
  return new Promise((resolve, reject) => {
    w.once('message', () => resolve(w));
    w.once('error', reject);
  });
}

const scenarios: Record<string, () => Promise<void>> = {
  /** Staged device reads in flight when the process leaves (exit, uncaught throw, rejection). */
  async 'exit-staged'() {
    p.configure({ threads: 4, taskSize: 4096, bounceBufferSize: 65536 });
    await using f = await p.open(file!, 'r', { compatMode: 'on' });
    const b = p.DeviceBuffer.alloc(8 << 20);
    for (let i = 0; i < 4; i++) f.read(b).catch(() => {});
    const how = process.argv[4];
    setTimeout(() => {
      if (how === 'exit') process.exit(0);
      if (how === 'throw') throw new Error('uncaught on purpose');
      void Promise.reject(new Error('unhandled on purpose'));
    }, 5);
    await new Promise((r) => setTimeout(r, 10_000));
  },

  /** A worker terminated while reads into its PinnedBuffer run; the main thread reads on. */
  async 'worker-pinned'() {
    const w = await worker('worker-pinned-reads');
    await w.terminate();
    await using f = await p.open(file!);
    report({ after: await f.read(Buffer.alloc(4096)) });
  },
  async 'worker-pinned-reads'() {
    p.configure({ threads: 2, taskSize: 1 << 20, hostStaging: true });
    const f = await p.open(file!);
    const pin = p.PinnedBuffer.alloc(8 << 20);
    for (let i = 0; i < 16; i++) f.read(pin).catch(() => {});
    parentPort!.postMessage('go');
    await new Promise((r) => setTimeout(r, 10_000));
  },

  /** Pinned memory is still freed after a worker that loaded penstock has exited. */
  async 'worker-exit-then-free'() {
    const w = await worker('worker-loads');
    await new Promise((r) => w.once('exit', r));
    const before = p.runtimeInfo().pinnedBytes;
    for (let i = 0; i < 20; i++) p.PinnedBuffer.alloc(16 << 20).free();
    report({ leaked: p.runtimeInfo().pinnedBytes - before });
  },
  async 'worker-loads'() {
    p.PinnedBuffer.alloc(4096).free();
    await using f = await p.open(file!);
    await f.read(Buffer.alloc(4096));
    parentPort!.postMessage('go');
  },

  /**
   * A worker sizes the shared pool up and does a host read, then configures it again and uses a
   * GPU while the main thread streams: the main thread's staged reads keep working, and the
   * worker is not held up until the main thread's stream is done.
   */
  async 'worker-resizes-pool'() {
    p.configure({ threads: 2, taskSize: 64 << 10 });
    await using f = await p.open(file!, 'r', { compatMode: 'on' });
    const size = (await f.size()) | 0;
    const b = p.DeviceBuffer.alloc(size);
    await f.read(b);
    const w1 = await worker('worker-threads-16');
    await new Promise((r) => w1.once('exit', r));
    let error: string | undefined;
    let first = 0;
    try {
      first = await f.read(b);
    } catch (e) {
      error = `${(e as { code?: string }).code}: ${(e as Error).message}`;
    }
    // Staged reads, four at a time so the pool never runs dry, until the worker's configure()
    // and GPU read are done (or a limit that only a worker held up until the end would reach).
    let workerDone = false;
    let rounds = 0;
    const limit = 1600;
    // Lanes of different sizes finish at different times, so the queue is never empty between them.
    const lane = async (bytes: number) => {
      for (; rounds < limit && !workerDone; rounds++) await f.read(b, { size: bytes });
    };
    const stream = Promise.all([1, 2, 3, 4].map((k) => lane(Math.min(size, k * (size >> 2)))));
    const w2 = await worker('worker-configure-device');
    await new Promise((resolve) => w2.once('message', resolve));
    workerDone = true;
    const roundsWhenDone = rounds;
    await stream;
    report({ first, error, workerBeforeStreamEnd: roundsWhenDone < limit, size });
  },
  async 'worker-threads-16'() {
    p.configure({ threads: 16 });
    await using f = await p.open(file!);
    await f.read(Buffer.alloc(1 << 20));
    parentPort!.postMessage('go');
  },
  async 'worker-configure-device'() {
    parentPort!.postMessage('go');
    p.configure({ threads: 6 });
    await using f = await p.open(file!, 'r', { compatMode: 'on' });
    const b = p.DeviceBuffer.alloc(1 << 20);
    await f.read(b);
    b.free();
    parentPort!.postMessage('done');
  },
  /** Reads and writes through O_DIRECT while the file system refuses it (the preload). */
  async 'direct-refused'() {
    p.configure({ directIoRead: true, directIoWrite: true, threads: 2 });
    const fs = await import('node:fs');
    const expected = fs.readFileSync(file!);
    await using f = await p.open(file!, 'r+');
    const got = Buffer.alloc(expected.length);
    const read = await f.readRecorded(got);
    const write = await f.writeRecorded(expected);
    report({
      readBytes: read.bytes, readDirect: read.direct, readFallbacks: read.fallbacks.map((r) => r.code), same: got.equals(expected),
      writeBytes: write.bytes, writeDirect: write.direct, writeFallbacks: write.fallbacks.map((r) => r.code), route: f.route.directIo?.code,
    });
  },
};

if (name !== undefined) {
  const run = scenarios[name];
  if (!run) throw new Error(`no scenario ${name}`);
  await run();
}
