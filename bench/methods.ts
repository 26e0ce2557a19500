/**
 * The ways of moving bytes that the suite compares: penstock's, and the plain Node ways a
 * program would use without it. Every method runs against the same files and the same
 * preallocated memory, so only the way of moving differs.
 */
import fs from 'node:fs';
import { configure, DeviceBuffer, getConfig, open, PinnedBuffer, type PenstockFile, type Settings } from '../src/index.js';
import type { Target } from './context.js';

const MiB = 1024 * 1024;
/** Linux moves at most ~2 GiB per read(); 1 GiB keeps every call well inside that. */
const MAX_SINGLE_READ = 1024 * MiB;

/** Memory shared by all methods, allocated once at the largest size and before any timing. */
export class Buffers {
  readonly maxSize: number;
  #dev: DeviceBuffer | undefined;
  #pinned: PinnedBuffer | undefined;
  #host: Buffer | undefined;

  constructor(maxSize: number) {
    this.maxSize = maxSize;
  }

  device(): DeviceBuffer {
    return (this.#dev ??= DeviceBuffer.alloc(this.maxSize));
  }

  pinned(): PinnedBuffer {
    return (this.#pinned ??= PinnedBuffer.alloc(this.maxSize));
  }

  host(): Buffer {
    if (!this.#host) {
      this.#host = Buffer.allocUnsafeSlow(this.maxSize);
      // Fault every page in now; otherwise the first method to use the buffer pays for it.
      this.#host.fill(0);
    }
    return this.#host;
  }

  free(): void {
    this.#dev?.free();
    this.#pinned?.free();
    this.#dev = this.#pinned = this.#host = undefined;
  }
}

export interface Runner {
  run(): Promise<number>;
  prepare?(): unknown;
  settle?(): unknown;
  close?(): Promise<void>;
}

export interface MethodContext {
  /** The file read from. */
  file: string;
  /** Where writes go. */
  out: string;
  size: number;
  buffers: Buffers;
  /** Concurrent calls, for the FileHandle method. */
  concurrency?: number;
}

export interface Method {
  id: string;
  name: string;
  target: Target;
  op: 'read' | 'write';
  /** For methods that bypass penstock: the Node calls the bytes go through (their path). */
  baseline?: string;
  make(c: MethodContext): Promise<Runner>;
}

function expect(moved: number, size: number): number {
  if (moved !== size) throw new Error(`moved ${moved} bytes, expected ${size}`);
  return size;
}

async function readSequential(fh: fs.promises.FileHandle, target: Uint8Array, size: number, chunk: number): Promise<number> {
  let off = 0;
  while (off < size) {
    const { bytesRead } = await fh.read(target, off, Math.min(chunk, size - off), off);
    if (bytesRead === 0) break;
    off += bytesRead;
  }
  return off;
}

/** `n` reads in flight at all times, each taking the next `chunk` of the file. */
async function readConcurrent(fh: fs.promises.FileHandle, target: Uint8Array, size: number, chunk: number, n: number): Promise<number> {
  let next = 0;
  let total = 0;
  const worker = async () => {
    for (;;) {
      const off = next;
      if (off >= size) return;
      next += chunk;
      const len = Math.min(chunk, size - off);
      for (let done = 0; done < len; ) {
        const { bytesRead } = await fh.read(target, off + done, len - done, off + done);
        if (bytesRead === 0) throw new Error('unexpected end of file');
        done += bytesRead;
      }
      total += len;
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(n, Math.ceil(size / chunk))) }, worker));
  return total;
}

function fsyncPath(file: string): void {
  const fd = fs.openSync(file, 'r');
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * penstock reading the whole file into `target`, with the settings in force, or with `variant`'s
 * changes to them for the row's duration (its id and name then say so).
 */
export function penstockRead(target: Target, variant?: { id: string; name: string; settings: Partial<Settings> }): Method {
  return {
    id: `penstock-${target}-read${variant ? `-${variant.id}` : ''}`,
    name: variant ? `penstock, ${variant.name}` : 'penstock',
    target,
    op: 'read',
    async make({ file, size, buffers }) {
      const mem = target === 'device' ? buffers.device() : buffers.host();
      const before = getConfig();
      if (variant) configure(variant.settings);
      const f = await open(file, 'r');
      return {
        run: async () => expect(await f.read(mem, { size }), size),
        close: async () => {
          await f.close();
          if (variant) configure(before);
        },
      };
    },
  };
}

/**
 * penstock reading into the GPU with kept pages off (`keptPagesMax: 0`): every read staged, as a
 * range read for the first time is. Beside the default row, it shows what kept pages add.
 */
export const penstockReadStaged = penstockRead('device', { id: 'staged', name: 'keptPagesMax 0 (every read staged)', settings: { keptPagesMax: 0 } });

export const readFileThenCopy: Method = {
  id: 'readfile-copyfrom',
  name: 'fs.readFile → copyFrom (pageable)',
  target: 'device',
  op: 'read',
  baseline: 'fs.promises.readFile into a new Buffer, then DeviceBuffer.copyFrom (pageable memory)',
  async make({ file, size, buffers }) {
    const dev = buffers.device();
    return {
      run: async () => {
        const b = await fs.promises.readFile(file);
        await dev.copyFrom(b);
        return expect(b.length, size);
      },
    };
  },
};

export const readPinnedThenCopy: Method = {
  id: 'fsread-pinned-copyfrom',
  name: 'fs read → PinnedBuffer → copyFrom',
  target: 'device',
  op: 'read',
  baseline: 'FileHandle.read of the whole file into PinnedBuffer.bytes (1 GiB calls), then DeviceBuffer.copyFrom',
  async make({ file, size, buffers }) {
    const dev = buffers.device();
    const view = buffers.pinned().bytes.subarray(0, size);
    const fh = await fs.promises.open(file, 'r');
    return {
      run: async () => {
        expect(await readSequential(fh, view, size, MAX_SINGLE_READ), size);
        await dev.copyFrom(view);
        return size;
      },
      close: () => fh.close(),
    };
  },
};

export const readFileHost: Method = {
  id: 'readfile',
  name: 'fs.readFile',
  target: 'host',
  op: 'read',
  baseline: 'fs.promises.readFile into a new Buffer',
  async make({ file, size }) {
    return { run: async () => expect((await fs.promises.readFile(file)).length, size) };
  },
};

export const sequentialLoop: Method = {
  id: 'fs-read-loop',
  name: 'fs read loop (4 MiB)',
  target: 'host',
  op: 'read',
  baseline: 'FileHandle.read of 4 MiB, one after another',
  async make({ file, size, buffers }) {
    const view = buffers.host().subarray(0, size);
    const fh = await fs.promises.open(file, 'r');
    return { run: async () => expect(await readSequential(fh, view, size, 4 * MiB), size), close: () => fh.close() };
  },
};

export function concurrentReads(n: number): Method {
  return {
    id: `filehandle-concurrent`,
    name: `${n} × FileHandle.read (4 MiB)`,
    target: 'host',
    op: 'read',
    baseline: `${n} concurrent FileHandle.read calls of 4 MiB on libuv's pool (UV_THREADPOOL_SIZE=${process.env.UV_THREADPOOL_SIZE ?? '4, the default'})`,
    async make({ file, size, buffers, concurrency }) {
      const view = buffers.host().subarray(0, size);
      const fh = await fs.promises.open(file, 'r');
      const k = concurrency ?? n;
      return { run: async () => expect(await readConcurrent(fh, view, size, 4 * MiB, k), size), close: () => fh.close() };
    },
  };
}

export function penstockWrite(target: Target): Method {
  return {
    id: `penstock-${target}-write`,
    name: target === 'device' ? 'penstock GPU → file' : 'penstock host → file',
    target,
    op: 'write',
    async make({ out, size, buffers }) {
      const mem = target === 'device' ? buffers.device() : buffers.host();
      let f: PenstockFile | undefined;
      return {
        prepare: async () => {
          fs.rmSync(out, { force: true });
          f = await open(out, 'w');
        },
        run: async () => expect(await f!.write(mem, { size }), size),
        settle: async () => {
          fs.fsyncSync(f!.fd);
          await f!.close();
        },
        close: async () => {
          await f?.close();
          fs.rmSync(out, { force: true });
        },
      };
    },
  };
}

function writeFileMethod(target: Target): Method {
  return {
    id: target === 'device' ? 'tobuffer-writefile' : 'writefile',
    name: target === 'device' ? 'toBuffer → fs.writeFile' : 'fs.writeFile',
    target,
    op: 'write',
    baseline: target === 'device' ? 'DeviceBuffer.toBuffer, then fs.promises.writeFile' : 'fs.promises.writeFile',
    async make({ out, size, buffers }) {
      const dev = target === 'device' ? buffers.device().subarray(0, size) : undefined;
      const host = target === 'host' ? buffers.host().subarray(0, size) : undefined;
      return {
        prepare: () => fs.rmSync(out, { force: true }),
        run: async () => {
          await fs.promises.writeFile(out, dev ? await dev.toBuffer() : host!);
          return size;
        },
        settle: () => fsyncPath(out),
        close: async () => fs.rmSync(out, { force: true }),
      };
    },
  };
}

export const writeFileDevice = writeFileMethod('device');
export const writeFileHost = writeFileMethod('host');
