/**
 * Files: `open()` and the file object, with parallel reads and writes at file offsets into and
 * from GPU or host memory, each routed, recorded and cancellable.
 */
import fs from 'node:fs';
import { promisify } from 'node:util';
import { native, type NativeOp, type NativeOpSpec, type NativeOpResult } from './binding.js';
import type { CompatMode } from './config.js';
import { DeviceBuffer } from './device-buffer.js';
import { AbortError, fromNative, usage } from './errors.js';
import { hostRegion, isHostMemory, type HostMemory } from './host-memory.js';
import { FileRouting, type FileRoute, type RouteReason } from './routing.js';
import { anyDevicePrepared, cufileEvidence, currentSettings, ensurePool, prepareDevice } from './runtime.js';
import { classifyCuFile, globalStats, recordOf, StatsBook, type OpRecord, type Route, type StatsSnapshot } from './stats.js';
import { readCached } from './inline-read.js';
import { planRead, planWrite, readsInline, taskSizeFor } from './transfer-plan.js';
import { checkLength, checkRange, describe } from './validate.js';

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

export interface OpenOptions {
  /** File mode when creating (default 0o644). */
  mode?: number;
  /** Overrides the process-wide compat mode for this file. */
  compatMode?: CompatMode;
}

export interface TransferOptions {
  /** Byte offset in the file (default 0). */
  fileOffset?: number;
  /** Bytes to move (default: the rest of the buffer after its offset). */
  size?: number;
  /** Cancels the remaining tasks; the Promise then rejects with an AbortError. */
  signal?: AbortSignal;
  /** Called on the JS thread with the bytes done so far, at most once per event-loop turn. */
  onProgress?: (bytesDone: number) => void;
}

export interface ReadOptions extends TransferOptions {
  /** Byte offset in the target buffer (default 0). */
  targetOffset?: number;
}

export interface WriteOptions extends TransferOptions {
  /** Byte offset in the source buffer (default 0). */
  sourceOffset?: number;
}

/** What an open file holds outside the JS heap; shared with the collector below. */
interface FileResources {
  path: string;
  fds: number[];
  routing: FileRouting;
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
  readonly path: string;
  readonly flags: OpenFlags;
  #fd: number;
  #directFd: number | undefined;
  #resources: FileResources;
  #directRefused: RouteReason | undefined;
  #mappedRefused: RouteReason | undefined;
  #inlineUnsupported = false;
  #routing: FileRouting;
  #stats = new StatsBook();
  #inflight = new Set<Promise<unknown>>();
  #closing: Promise<void> | undefined;

  /** @internal Use `open()`. */
  constructor(path: string, flags: OpenFlags, fd: number, compatMode: CompatMode) {
    this.path = path;
    this.flags = flags;
    this.#fd = fd;
    this.#routing = new FileRouting(compatMode);
    this.#resources = { path, fds: [fd], routing: this.#routing };
    fileCollector.register(this, this.#resources, this);
  }

  /** The OS file descriptor (-1 once closed). */
  get fd(): number {
    return this.#closing ? -1 : this.#fd;
  }

  get closed(): boolean {
    return this.#closing !== undefined;
  }

  /** Where device I/O for this file goes, and why (see {@link FileRoute}). */
  get route(): FileRoute {
    const r: FileRoute = this.#routing.route;
    return {
      ...r,
      ...(this.#directRefused ? { directIo: { ...this.#directRefused } } : {}),
      ...(this.#mappedRefused ? { mapped: { ...this.#mappedRefused } } : {}),
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

  resetStats(): void {
    this.#stats.reset();
  }

  /**
   * Reads from the file into `target` (GPU or host memory). Resolves to the bytes read, which is
   * fewer than asked only at end of file; bytes of the target past that are left untouched.
   */
  async read(target: Memory, options: ReadOptions = {}): Promise<number> {
    // Awaited here (not chained with .then) so that errors carry the caller in their async stack.
    return (await this.#transfer(false, target, options.targetOffset ?? 0, options)).bytes;
  }

  /** @internal A read that also reports the route record of this one operation. */
  readRecorded(target: Memory, options: ReadOptions = {}): Promise<OpRecord> {
    return this.#transfer(false, target, options.targetOffset ?? 0, options);
  }

  /** Writes `source` (GPU or host memory) to the file. Resolves to the bytes written. */
  async write(source: Memory, options: WriteOptions = {}): Promise<number> {
    return (await this.#transfer(true, source, options.sourceOffset ?? 0, options)).bytes;
  }

  /** @internal A write that also reports the route record of this one operation. */
  writeRecorded(source: Memory, options: WriteOptions = {}): Promise<OpRecord> {
    return this.#transfer(true, source, options.sourceOffset ?? 0, options);
  }

  /** @internal Counts `p` among this file's operations in flight, so that close() waits for it. */
  trackOperation(p: Promise<unknown>): void {
    this.#assertOpen();
    this.#inflight.add(p);
    const done = () => this.#inflight.delete(p);
    p.then(done, done);
  }

  /** Closes the file after the operations in flight settle. Idempotent. */
  close(): Promise<void> {
    if (!this.#closing) this.#closing = this.#doClose();
    return this.#closing;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  async #doClose(): Promise<void> {
    await Promise.allSettled([...this.#inflight]);
    this.#routing.release();
    fileCollector.unregister(this);
    const fds = [this.#fd, this.#directFd].filter((x): x is number => x !== undefined && x >= 0);
    this.#directFd = undefined;
    await Promise.all(fds.map((fd) => closeAsync(fd)));
  }

  #assertOpen(): void {
    if (this.#closing) throw usage('ERR_PENSTOCK_FILE_CLOSED', `The file ${this.path} is closed`);
  }

  #transfer(write: boolean, memory: Memory, memOffset: number, options: TransferOptions): Promise<OpRecord> {
    let started: Promise<OpRecord>;
    try {
      started = this.#start(write, memory, memOffset, options);
    } catch (err) {
      return Promise.reject(err);
    }
    return this.#track(started);
  }

  /** Keeps the operation in the in-flight set until it settles (close() waits for that set). */
  async #track(started: Promise<OpRecord>): Promise<OpRecord> {
    this.#inflight.add(started);
    try {
      // Awaiting (rather than attaching handlers) keeps the caller in async stack traces.
      return await started;
    } finally {
      this.#inflight.delete(started);
    }
  }

  #start(write: boolean, memory: Memory, memOffset: number, options: TransferOptions): Promise<OpRecord> {
    this.#assertOpen();
    const mode = FLAG_TABLE[this.flags];
    if (write && !mode.write) throw usage('ERR_PENSTOCK_NOT_WRITABLE', `The file ${this.path} was opened '${this.flags}' (read-only)`);
    if (!write && !mode.read) throw usage('ERR_PENSTOCK_NOT_READABLE', `The file ${this.path} was opened '${this.flags}' (write-only)`);
    const fileOffset = options.fileOffset ?? 0;
    checkLength(fileOffset, 'fileOffset');
    checkLength(memOffset, write ? 'sourceOffset' : 'targetOffset');
    if (options.onProgress !== undefined && typeof options.onProgress !== 'function')
      throw usage('ERR_PENSTOCK_INVALID_ARGUMENT', 'onProgress must be a function');
    const signal = options.signal;
    if (signal !== undefined && !(signal instanceof AbortSignal))
      throw usage('ERR_PENSTOCK_INVALID_ARGUMENT', 'signal must be an AbortSignal');
    if (signal?.aborted) throw new AbortError(undefined, { cause: signal.reason });
    const s = currentSettings();
    // Decided once the size is known to be valid.
    const plan = (size: number, intoDevice: boolean) =>
      write ? { direct: s.directIoWrite } : planRead(s, this.#fd, fileOffset, size, intoDevice, this.#mappedRefused !== undefined);

    if (memory instanceof DeviceBuffer) {
      memory.assertLive();
      const size = options.size ?? Math.max(0, memory.byteLength - memOffset);
      checkLength(size, 'size');
      checkRange(memOffset, size, memory.byteLength, 'DeviceBuffer');
      const device = memory.device;
      let route: Route = 'posix-device';
      let cufile = false;
      if (this.#routing.route.compatMode === 'off' || size >= s.gdsThreshold) {
        cufile = this.#routing.decide(this.#fd).device === 'cufile';
      }
      const spec: NativeOpSpec = {
        write, route: cufile ? 'cufile' : 'posix-device', fd: this.#fd, directFd: -1, fileOffset, size,
        taskSize: taskSizeFor(s, size), devicePtr: memory.ptr + BigInt(memOffset), device,
      };
      if (cufile) {
        spec.cufileHandle = this.#routing.cufileHandle!;
        spec.cufileBase = memory.ptr;
        spec.cufileBaseOffset = memOffset;
      } else {
        prepareDevice(device);
        const p = plan(size, true);
        spec.directFd = p.direct ? this.#direct() : -1;
        if (write) Object.assign(spec, planWrite(s, spec.directFd >= 0, size));
        if (p.mapped) {
          spec.mappedRunners = p.mapped.runners;
          spec.mappedPiece = p.mapped.piece;
        }
      }
      ensurePool();
      const before = cufile ? cufileEvidence(write) : null;
      return memory.withBusy(() =>
        this.#run(spec, signal, options.onProgress, (r, failed) => {
          if (cufile) route = classifyCuFile(before, cufileEvidence(write));
          return this.#record(route, device, r, failed, spec.directFd >= 0);
        }),
      );
    }

    if (!isHostMemory(memory))
      throw usage('ERR_PENSTOCK_INVALID_BUFFER', `Expected a DeviceBuffer, PinnedBuffer, Buffer, TypedArray, DataView or ArrayBuffer, got ${describe(memory)}`);
    const host = hostRegion(memory, write ? 'source' : 'target');
    const size = options.size ?? Math.max(0, host.length - memOffset);
    checkLength(size, 'size');
    checkRange(memOffset, size, host.length, write ? 'source buffer' : 'target buffer');
    if (!write && !this.#inlineUnsupported && readsInline(s, size)) {
      const r = readCached(this.#fd, host, memOffset, size, fileOffset);
      if (r === 'unsupported') this.#inlineUnsupported = true;
      else if (r !== 'pool') return this.#inlineDone(r.bytes, r.ns, options.onProgress);
    }
    ensurePool();
    const spec: NativeOpSpec = {
      write, route: 'posix-host', fd: this.#fd, directFd: plan(size, false).direct ? this.#direct() : -1, fileOffset, size,
      taskSize: taskSizeFor(s, size), hostBuffer: host.buffer, hostOffset: host.offset + memOffset, hostStaging: s.hostStaging,
    };
    if (write) Object.assign(spec, planWrite(s, spec.directFd >= 0, size));
    const pinned = host.pinned;
    if (pinned) pinned.busy++;
    return this.#hostRun(spec, signal, options.onProgress, pinned);
  }

  /** Records a read done on the calling thread (inline-read.ts) and settles it as the pool would. */
  #inlineDone(bytes: number, ns: number, onProgress: ((n: number) => void) | undefined): Promise<OpRecord> {
    const rec = recordOf('posix-host', undefined, { bytes, tasks: 1, busyNs: ns, ioNs: ns, waitNs: 0, peakTasks: 1, eof: false }, false, false);
    rec.inline = true;
    this.#stats.record(rec);
    globalStats.record(rec);
    if (!onProgress) return Promise.resolve(rec);
    // Progress comes after the call returns, as it does from the pool.
    return Promise.resolve().then(() => {
      try {
        onProgress(bytes);
      } catch (err) {
        queueMicrotask(() => {
          throw err;
        });
      }
      return rec;
    });
  }

  async #hostRun(spec: NativeOpSpec, signal: AbortSignal | undefined, onProgress: ((n: number) => void) | undefined, pinned: { busy: number } | undefined): Promise<OpRecord> {
    try {
      return await this.#run(spec, signal, onProgress, (r, failed) => this.#record('posix-host', undefined, r, failed, spec.directFd >= 0));
    } finally {
      if (pinned) pinned.busy--;
    }
  }

  async #run(
    spec: NativeOpSpec,
    signal: AbortSignal | undefined,
    onProgress: ((n: number) => void) | undefined,
    record: (r: NativeOpResult | undefined, failed: boolean) => OpRecord,
  ): Promise<OpRecord> {
    if (onProgress) {
      spec.progress = (n: number) => {
        try {
          onProgress(n);
        } catch (err) {
          // A throwing callback must not break the I/O: report it like an unhandled error.
          queueMicrotask(() => {
            throw err;
          });
        }
      };
    }
    let op: NativeOp;
    try {
      op = native().submit(spec);
    } catch (err) {
      throw fromNative(err, this.path);
    }
    const onAbort = () => op.cancel();
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      const r = await op.promise;
      const rec = record(r, false);
      this.#stats.record(rec);
      globalStats.record(rec);
      return rec;
    } catch (err) {
      const rec = record(undefined, true);
      this.#stats.record(rec);
      globalStats.record(rec);
      const e = fromNative(err, this.path);
      if (e instanceof AbortError && signal?.reason !== undefined) throw new AbortError(undefined, { cause: signal.reason });
      throw e;
    } finally {
      signal?.removeEventListener('abort', onAbort);
    }
  }

  /**
   * The record of one operation. A mapped share that could not go ahead is remembered, so later
   * reads of this file do not try again, and shows in `route.mapped`.
   */
  #record(route: Route, device: number | undefined, r: NativeOpResult | undefined, failed: boolean, direct: boolean): OpRecord {
    const rec = recordOf(route, device, r, failed, direct);
    const e = r?.mapped?.error;
    if (e) {
      rec.mappedFallback = this.#mappedRefused ??= {
        code: 'MAPPED_REFUSED',
        message: `The GPU could not copy straight from this file's page cache (${e.code ?? 'ERROR'}: ${e.message}); penstock's staged path carries its reads instead.`,
      };
    }
    return rec;
  }

  /** The O_DIRECT descriptor, opened on first need; -1 where the file system refuses O_DIRECT. */
  #direct(): number {
    if (this.#directFd !== undefined) return this.#directFd;
    const mode = FLAG_TABLE[this.flags];
    const acc = mode.read && mode.write ? fs.constants.O_RDWR : mode.write ? fs.constants.O_WRONLY : fs.constants.O_RDONLY;
    let fd = -1;
    try {
      fd = fs.openSync(this.path, acc | fs.constants.O_DIRECT);
    } catch (err) {
      this.#directRefused = {
        code: 'DIRECT_IO_REFUSED',
        message: `O_DIRECT could not be used for this file (${(err as NodeJS.ErrnoException).code ?? 'error'}): buffered I/O is used instead.`,
      };
    }
    this.#directFd = fd;
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
  const entry = FLAG_TABLE[flags];
  if (!entry) throw usage('ERR_PENSTOCK_INVALID_ARGUMENT', `Unknown open flags ${describe(flags)} (use r, r+, w, w+, wx, wx+)`);
  const compatMode = options.compatMode ?? currentSettings().compatMode;
  if (!['auto', 'on', 'off'].includes(compatMode))
    throw usage('ERR_PENSTOCK_INVALID_ARGUMENT', `Unknown compatMode ${describe(compatMode)}`);
  let fd: number;
  try {
    fd = await openAsync(path, entry.flags, options.mode ?? 0o644);
  } catch (err) {
    throw systemError(err as NodeJS.ErrnoException);
  }
  const st = await fstatAsync(fd);
  if (st.isDirectory()) {
    await closeAsync(fd);
    throw systemError(Object.assign(new Error(`EISDIR: illegal operation on a directory, open '${path}'`), { code: 'EISDIR', errno: -21, syscall: 'open', path }));
  }
  const file = new PenstockFile(path, flags, fd, compatMode);
  // Where the process already uses a GPU, register with cuFile now, as part of opening, so the
  // first read does not pay for it. Elsewhere it waits for the first device operation, and
  // host-only programs never load CUDA at all.
  if (compatMode !== 'on' && anyDevicePrepared()) file.prepareDeviceRoute();
  return file;
}

/** Node's own fs errors, made instances of PenstockSystemError with the same fields. */
function systemError(err: NodeJS.ErrnoException): Error {
  if (!err.code || err.errno === undefined) return err;
  const msg = err.message.replace(/^[A-Z]+: /, '').replace(/, \w+ '.*'$/, '');
  return fromNative({ kind: 'os', code: err.code, message: msg, errno: Math.abs(err.errno), syscall: err.syscall ?? 'open' }, err.path);
}
