/**
 * Files: `open()` and the file object, with parallel reads and writes at file offsets into and
 * from GPU or host memory, each routed, recorded and cancellable.
 */
import fs from 'node:fs';
import { promisify } from 'node:util';
import type { CompatMode } from '../settings/config.js';
import { DeviceBuffer } from '../memory/device-buffer.js';
import { AbortError, usage } from '../vocabulary/errors.js';
import { hostRegion, type HostMemory } from '../memory/host-memory.js';
import { Lifetime } from '../memory/lifetime.js';
import { transferOptions, type TransferOptions, type ReadOptions, type WriteOptions, type ValidOptions } from './transfer-options.js';
import { FileRouting, type FileRoute } from './routing.js';
import { currentSettings } from '../addon/runtime.js';
import { anyDevicePrepared, prepareDevice } from '../addon/gpu-preparation.js';
import { globalStats, StatsBook, type Booking, type StatsSnapshot } from './stats.js';
import { bookingOf, type OpRecord } from './op-record.js';
import { KeptFile } from './kept-pages.js';
import { directIoUnavailable } from '../vocabulary/reasons.js';
import { planTransfer, usesDirect, type TransferRequest } from '../plan/transfer-way.js';
import { transferFactsOf, type FileTransferState } from './transfer-facts.js';
import { isFinal, runHandingBack, runOnPool, type TransferJob, type TransferTarget } from './transfer-run.js';
import { checkLength, checkRange, describe } from '../vocabulary/validate.js';
import { checkOptionKeys } from '../settings/option-keys.js';
import { openRegularFile } from './open-regular.js';

export type { ReadOptions, TransferOptions, WriteOptions } from './transfer-options.js';

const openAsync = promisify(fs.open);
const closeAsync = promisify(fs.close);
const fstatAsync = promisify(fs.fstat);

/** `r` read; `r+` read and write; `w` write (create, truncate); `w+` read and write (create, truncate); `wx`/`wx+` fail if it exists. */
export type OpenFlags = 'r' | 'r+' | 'w' | 'w+' | 'wx' | 'wx+';

const FLAG_TABLE: Record<OpenFlags, { flags: number; read: boolean; write: boolean }> = {
  r: { flags: fs.constants.O_RDONLY, read: true, write: false },
  'r+': { flags: fs.constants.O_RDWR, read: true, write: true },
  w: { flags: fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_TRUNC, read: false, write: true },
  'w+': { flags: fs.constants.O_RDWR | fs.constants.O_CREAT | fs.constants.O_TRUNC, read: true, write: true },
  wx: { flags: fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL, read: false, write: true },
  'wx+': { flags: fs.constants.O_RDWR | fs.constants.O_CREAT | fs.constants.O_EXCL, read: true, write: true },
};

/** Options of `open()`. */
export interface OpenOptions {
  /** File mode when creating (default 0o644). */
  mode?: number;
  /** Overrides the process-wide compat mode for this file. */
  compatMode?: CompatMode;
}

/** What an open file holds outside the JS heap; shared with the collector below. */
interface FileResources {
  path: string;
  fds: number[];
  routing: FileRouting;
  kept: KeptFile;
}

/**
 * Files that become unreachable while open are closed here, with a warning (as Node does for
 * its FileHandle): the descriptors and the cuFile registration would otherwise leak.
 */
const fileCollector = new FinalizationRegistry<FileResources>((res) => {
  process.emitWarning(
    `Closing ${res.path} (file descriptor ${res.fds[0]}) on garbage collection; close penstock files with close() or \`await using\``,
    { code: 'PENSTOCK_FILE_NOT_CLOSED' },
  );
  res.routing.release();
  res.kept.release();
  for (const fd of res.fds) {
    try {
      fs.closeSync(fd);
    } catch {
      // Already closed by someone else: nothing left to release.
    }
  }
});

/** Memory a file can be read into or written from. */
export type Memory = DeviceBuffer | HostMemory;

/**
 * An open file. Reads and writes are split into tasks on penstock's thread pool; each returns
 * one Promise. `close()` (or `await using`) waits for operations in flight.
 */
export class PenstockFile {
  /** The path the file was opened with. */
  readonly path: string;
  /** The flags it was opened with. */
  readonly flags: OpenFlags;
  #fd: number;
  #resources: FileResources;
  // What this file's transfers have learnt (transfer-facts.ts), read by each plan.
  #state: FileTransferState = { inlineUnsupported: false };
  #routing: FileRouting;
  #kept = new KeptFile();
  #stats = new StatsBook();
  #directPending: Promise<number> | undefined;
  // Operations in flight; close() ends it once they have settled.
  readonly #lifetime: Lifetime;
  #closing: Promise<void> | undefined;

  /** @internal Use `open()`. */
  constructor(path: string, flags: OpenFlags, fd: number, compatMode: CompatMode) {
    this.path = path;
    this.flags = flags;
    this.#fd = fd;
    this.#routing = new FileRouting(compatMode);
    this.#lifetime = new Lifetime(`The file ${path}`, 'ERR_PENSTOCK_FILE_CLOSED', 'is closed');
    this.#resources = { path, fds: [fd], routing: this.#routing, kept: this.#kept };
    fileCollector.register(this, this.#resources, this);
  }

  /** The OS file descriptor (-1 once closed). */
  get fd(): number {
    return this.#closing ? -1 : this.#fd;
  }

  /** Whether `close()` was called (or the file was disposed). */
  get closed(): boolean {
    return this.#closing !== undefined;
  }

  /** Where device I/O for this file goes, and why (see {@link FileRoute}). */
  get route(): FileRoute {
    const r: FileRoute = this.#routing.route;
    return {
      ...r,
      ...(this.#state.directRefused ? { directIo: { ...this.#state.directRefused } } : {}),
      ...(this.#state.mappedRefused ? { mapped: { ...this.#state.mappedRefused } } : {}),
      ...(this.#kept.refused ? { keptPages: { ...this.#kept.refused } } : {}),
    };
  }

  /** @internal Decides the device route now (cuFile registration); errors wait for device I/O. */
  prepareDeviceRoute(): void {
    try {
      this.#routing.decide(this.#fd);
    } catch {
      // 'off' mode: the same error is raised by the first device operation.
    }
  }

  /** Size of the file in bytes. */
  async size(): Promise<number> {
    this.#assertOpen();
    return (await fstatAsync(this.#fd)).size;
  }

  /** This file's operations by route. */
  stats(): StatsSnapshot {
    return this.#stats.snapshot();
  }

  /** Zeroes this file's counters (the process-wide ones are kept). */
  resetStats(): void {
    this.#stats.reset();
  }

  /**
   * Reads from the file into `target` (GPU or host memory). Resolves to the bytes read, which is
   * fewer than asked only at end of file; bytes of the target past that are left untouched.
   */
  async read(target: Memory, options?: ReadOptions): Promise<number> {
    // Awaited here (not chained with .then) so that errors carry the caller in their async stack.
    return (await this.#transfer(false, target, options)).bytes;
  }

  /** @internal A read that also reports the route record of this one operation. */
  readRecorded(target: Memory, options?: ReadOptions): Promise<OpRecord> {
    return this.#transfer(false, target, options);
  }

  /** Writes `source` (GPU or host memory) to the file. Resolves to the bytes written. */
  async write(source: Memory, options?: WriteOptions): Promise<number> {
    return (await this.#transfer(true, source, options)).bytes;
  }

  /** @internal A write that also reports the route record of this one operation. */
  writeRecorded(source: Memory, options?: WriteOptions): Promise<OpRecord> {
    return this.#transfer(true, source, options);
  }

  /** @internal Counts `p` among this file's operations in flight, so that close() waits for it. */
  trackOperation(p: Promise<unknown>): void {
    const leave = this.#lifetime.enter();
    p.then(leave, leave);
  }

  /** Closes the file after the operations in flight settle. Idempotent. */
  close(): Promise<void> {
    if (!this.#closing) this.#closing = this.#doClose();
    return this.#closing;
  }

  /** Closes the file at the end of an `await using` block (as `close()`). */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  async #doClose(): Promise<void> {
    await this.#lifetime.endWhenIdle();
    this.#routing.release();
    this.#kept.release();
    fileCollector.unregister(this);
    const fds = [this.#fd, this.#state.directFd].filter((x): x is number => x !== undefined && x >= 0);
    this.#state.directFd = undefined;
    await Promise.all(fds.map((fd) => closeAsync(fd)));
  }

  #assertOpen(): void {
    this.#lifetime.assertLive();
  }

  async #transfer(write: boolean, memory: Memory, options: TransferOptions | undefined): Promise<OpRecord> {
    // Awaited here, so that errors carry the caller in their async stack.
    return await this.#lifetime.use(() => this.#start(write, memory, transferOptions(options, write)));
  }

  async #start(write: boolean, memory: Memory, options: ValidOptions): Promise<OpRecord> {
    const mode = FLAG_TABLE[this.flags];
    if (write && !mode.write) throw usage('ERR_PENSTOCK_NOT_WRITABLE', `The file ${this.path} was opened '${this.flags}' (read-only)`);
    if (!write && !mode.read) throw usage('ERR_PENSTOCK_NOT_READABLE', `The file ${this.path} was opened '${this.flags}' (write-only)`);
    const { fileOffset, memOffset, signal, onProgress } = options;
    if (signal?.aborted) throw new AbortError(undefined, { cause: signal.reason });
    const settings = currentSettings();
    let target: TransferTarget;
    let size: number;
    if (memory instanceof DeviceBuffer) {
      memory.assertLive();
      size = options.size ?? Math.max(0, memory.byteLength - memOffset);
      checkLength(size, 'size');
      checkRange(memOffset, size, memory.byteLength, 'DeviceBuffer');
      // Buffers that did not allocate (imported ones) meet the GPU's staging resources here.
      prepareDevice(memory.device, size);
      target = { kind: 'device', buffer: memory, memOffset };
    } else {
      const host = hostRegion(memory, write ? 'source' : 'target');
      size = options.size ?? Math.max(0, host.length - memOffset);
      checkLength(size, 'size');
      checkRange(memOffset, size, host.length, write ? 'source buffer' : 'target buffer');
      target = { kind: 'host', host, memOffset };
    }
    const request: TransferRequest = { op: write ? 'write' : 'read', memory: target.kind, size, fileOffset };
    const facts = transferFactsOf(request, { settings, fd: this.#fd, routing: this.#routing, kept: this.#kept, state: this.#state });
    const job: TransferJob = {
      settings, path: this.path, fd: this.#fd, write, size, fileOffset, target, signal, onProgress, state: this.#state, kept: this.#kept,
      cufileHandle: () => this.#routing.cufileHandle!, book: (b) => this.#book(b), count: (rec) => {
        this.#book(bookingOf(rec));
        return rec;
      },
    };
    // Each pass either runs the way planned, or learns a fact the plan asked for (the O_DIRECT
    // descriptor), or what a way handed back; each of those is learnt at most once.
    for (;;) {
      const plan = planTransfer(request, facts);
      const { way } = plan;
      if (usesDirect(way) && this.#state.directFd === undefined) {
        await this.#direct();
        continue;
      }
      if (!isFinal(way)) {
        const out = await runHandingBack(plan, job);
        if ('way' in out) return out;
        request.handedBack = { ...request.handedBack, ...out };
        continue;
      }
      if (way.kind !== 'cufile' && way.cold) this.#routing.noteColdReads(way.cold);
      return runOnPool(way, plan.fallbacks, job);
    }
  }

  /** Counts an operation in this file's stats and the process's. */
  #book(b: Booking): void {
    this.#stats.record(b);
    globalStats.record(b);
  }

  /**
   * The O_DIRECT descriptor, opened on first need; -1 where the file system refuses O_DIRECT.
   * It is opened from the descriptor already held (its /proc/self/fd link), never by path: the
   * path may name another file by now (an atomic replace of a checkpoint, a rename), and bytes of
   * that file must never be read or written in this one's place. Same device and inode, or none.
   */
  #direct(): Promise<number> {
    return (this.#directPending ??= this.#openDirect());
  }

  async #openDirect(): Promise<number> {
    const mode = FLAG_TABLE[this.flags];
    const acc = mode.read && mode.write ? fs.constants.O_RDWR : mode.write ? fs.constants.O_WRONLY : fs.constants.O_RDONLY;
    let fd = -1;
    let why: string | undefined;
    try {
      fd = await openAsync(`/proc/self/fd/${this.#fd}`, acc | fs.constants.O_DIRECT);
      const [held, reopened] = await Promise.all([fstatAsync(this.#fd), fstatAsync(fd)]);
      if (held.dev !== reopened.dev || held.ino !== reopened.ino) {
        why = 'the reopened descriptor is another file';
        await closeAsync(fd);
        fd = -1;
      }
    } catch (err) {
      why = (err as NodeJS.ErrnoException).code ?? 'error';
      fd = -1;
    }
    if (why !== undefined) this.#state.directRefused = directIoUnavailable(why);
    this.#state.directFd = fd;
    if (fd >= 0) this.#resources.fds.push(fd);
    return fd;
  }
}

/**
 * Opens a file for penstock I/O.
 * @param path the file
 * @param flags `r` (default), `r+`, `w`, `w+`, `wx`, `wx+`
 */
export async function open(path: string, flags: OpenFlags = 'r', options: OpenOptions = {}): Promise<PenstockFile> {
  if (typeof path !== 'string' || path.length === 0)
    throw usage('ERR_PENSTOCK_INVALID_ARGUMENT', `path must be a non-empty string, got ${describe(path)}`);
  // Own keys only: '__proto__' or 'toString' name no flags.
  const entry = typeof flags === 'string' && Object.hasOwn(FLAG_TABLE, flags) ? FLAG_TABLE[flags] : undefined;
  if (!entry) throw usage('ERR_PENSTOCK_INVALID_ARGUMENT', `Unknown open flags ${describe(flags)} (use r, r+, w, w+, wx, wx+)`);
  checkOptionKeys('open', options);
  if (options.mode !== undefined && (typeof options.mode !== 'number' || !Number.isInteger(options.mode) || options.mode < 0 || options.mode > 0o7777))
    throw usage('ERR_PENSTOCK_INVALID_ARGUMENT', `mode must be a file mode from 0 to 0o7777, got ${describe(options.mode)}`);
  const compatMode = options.compatMode ?? currentSettings().compatMode;
  if (!['auto', 'on', 'off'].includes(compatMode))
    throw usage('ERR_PENSTOCK_INVALID_ARGUMENT', `Unknown compatMode ${describe(compatMode)}`);
  // A FIFO, device or socket is refused without blocking; a directory is EISDIR.
  const fd = await openRegularFile(path, entry.flags, options.mode ?? 0o644);
  const file = new PenstockFile(path, flags, fd, compatMode);
  // Where the process already uses a GPU, register with cuFile now, as part of opening, so the
  // first read does not pay for it. Elsewhere it waits for the first device operation, and
  // host-only programs never load CUDA at all.
  if (compatMode !== 'on' && anyDevicePrepared()) file.prepareDeviceRoute();
  return file;
}
