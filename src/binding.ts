/**
 * The raw surface of the native addon, typed in one private place. Nothing here is public API:
 * the classes in the other modules wrap it, validate every argument before it gets here, and turn
 * the plain error records it produces into typed errors.
 */
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import fs from 'node:fs';

/** A failure described by native code as plain data; `errors.ts` turns it into a typed error. */
export interface NativeErrorRecord {
  kind: 'os' | 'cuda' | 'cufile' | 'penstock' | 'abort';
  /** ENOENT, CUDA_ERROR_OUT_OF_MEMORY, CU_FILE_HANDLE_NOT_REGISTERED, ERR_PENSTOCK_… */
  code: string;
  message: string;
  /** Positive errno for `os` errors. */
  errno?: number;
  syscall?: string;
  /** Numeric CUDA or cuFile code. */
  number?: number;
}

export interface LibraryStatus {
  loaded: boolean;
  /** The path dlopen was given. */
  path: string;
  /** The file actually mapped (from dladdr), when loaded. */
  resolvedPath?: string;
  error?: string;
  /** Required symbols that were missing. */
  missing?: string[];
}

export interface CudaStatus extends LibraryStatus {
  initialized: boolean;
  initError?: NativeErrorRecord;
  driverVersion?: number;
  deviceCount?: number;
}

export interface NativeDeviceInfo {
  ordinal: number;
  name: string;
  totalMemory: number;
  pciBusId: string;
  computeCapability: [number, number];
}

export interface CuFileDriverProps {
  nvfsMajor: number;
  nvfsMinor: number;
  pollThresholdKiB: number;
  maxDirectIoKiB: number;
  dstatusflags: number;
  dcontrolflags: number;
  fflags: number;
  maxDeviceCacheKiB: number;
  perBufferCacheKiB: number;
  maxDevicePinnedKiB: number;
  maxBatchIo: number;
  maxBatchIoTimeoutMs: number;
}

export interface CuFileStatus extends LibraryStatus {
  version?: number;
  driverOpen: boolean;
  driverError?: NativeErrorRecord;
  props?: CuFileDriverProps;
  /** Whether level-3 statistics could be switched on (they separate direct from POSIX reads). */
  statsLevel: number;
  statsError?: string;
}

/** Per-GPU cuFile counters from level-3 statistics. */
export interface CuFileGpuCounters {
  totalReads: number;
  p2pReads: number;
  nvfsReads: number;
  posixReads: number;
  unalignedReads: number;
  readErrors: number;
  nvfsWrites: number;
  posixWrites: number;
  registeredBytes: number;
}

export type NativeRoute = 'posix-host' | 'posix-device' | 'cufile';

/** One operation as native code sees it: plain data, validated in TypeScript. */
export interface NativeOpSpec {
  write: boolean;
  route: NativeRoute;
  fd: number;
  /** A second descriptor opened with O_DIRECT, or -1. */
  directFd: number;
  fileOffset: number;
  size: number;
  taskSize: number;
  /** Host target: the view's ArrayBuffer and the byte offset inside it. */
  hostBuffer?: ArrayBuffer | SharedArrayBuffer;
  hostOffset?: number;
  /** Device target. */
  devicePtr?: bigint;
  device?: number;
  /** Registered cuFile handle id (route `cufile`). */
  cufileHandle?: number;
  /** Base pointer handed to cuFile and the offset from it. */
  cufileBase?: bigint;
  cufileBaseOffset?: number;
  progress?: (bytesDone: number) => void;
  /** Host reads of 1 MiB+ tasks through cache-sized scratch and streaming stores. */
  hostStaging?: boolean;
  /** Buffered writes through cache-sized scratch: host writes of 1 MiB+ tasks in pieces of this size, staged writes piece by piece (0 or absent: none). */
  writePiece?: number;
  /** At most this many tasks in flight (0 or absent: one per pool thread). */
  maxRunners?: number;
  /** Staged device reads: workers that carry pieces from the range's end by registering page-cache pages. */
  mappedRunners?: number;
  /** Bytes per mapped piece. */
  mappedPiece?: number;
}

/** What the mapped runners carried of a staged device read. */
export interface NativeMappedResult {
  tasks: number;
  bytes: number;
  busyNs: number;
  ioNs: number;
  waitNs: number;
  /** Why they stopped early (registration refused, mmap failed); the staged path carried the rest. */
  error?: Error & { code?: string };
}

export interface NativeOpResult {
  bytes: number;
  tasks: number;
  /** Sum of task durations, nanoseconds (thread time spent on this operation). */
  busyNs: number;
  /** Of that, time inside read/write system calls. */
  ioNs: number;
  /** Of that, time waiting for copies to or from the GPU. */
  waitNs: number;
  /** The most tasks of this operation that ran at once (mapped runners not counted). */
  peakTasks: number;
  /** Present when mapped runners were asked for; their share is not in the fields above. */
  mapped?: NativeMappedResult;
  /** Bytes that cuFile itself reported as short reads (end of file). */
  eof: boolean;
}

export interface NativeOp {
  promise: Promise<NativeOpResult>;
  cancel(): void;
}

export interface NativeAddon {
  init(): void;
  setThreads(n: number): void;
  poolInfo(): { threads: number; queued: number };
  cudaLoad(path: string): CudaStatus;
  cudaStatus(): CudaStatus;
  deviceInfo(ordinal: number): NativeDeviceInfo;
  /** Retains the primary context and allocates bounce buffers for the current pool size. */
  devicePrepare(ordinal: number, bounceBytes: number, numaNode: number): void;
  deviceAlloc(ordinal: number, size: number): bigint;
  deviceFree(ordinal: number, ptr: bigint): void;
  /** Owning device, base and size of a device allocation, or throws for a non-device pointer. */
  pointerInfo(ptr: bigint): { device: number; base: bigint; size: number };
  memGetInfo(ordinal: number): { free: number; total: number };
  copyHostToDevice(ordinal: number, dst: bigint, src: ArrayBuffer | SharedArrayBuffer, srcOffset: number, size: number): NativeOp;
  copyDeviceToHost(ordinal: number, dst: ArrayBuffer | SharedArrayBuffer, dstOffset: number, src: bigint, size: number): NativeOp;
  pinnedAlloc(size: number): ArrayBuffer;
  /** Detaches the ArrayBuffer (so views become empty) and frees the pinned memory. */
  pinnedFree(buffer: ArrayBuffer): void;
  pinnedBytes(): number;
  cufileLoad(path: string): CuFileStatus;
  cufileStatus(): CuFileStatus;
  /** Opens the cuFile driver (device `ordinal`'s context current), switching on stats first. */
  cufileDriverOpen(ordinal: number): CuFileStatus;
  cufileRegister(fd: number): { handle?: number; error?: NativeErrorRecord };
  cufileDeregister(handle: number): void;
  cufileStats(): CuFileGpuCounters[] | null;
  submit(spec: NativeOpSpec): NativeOp;
  /** Operations started and not yet settled, process-wide. */
  inflight(): number;
  /** Fraction of sampled pages of a file range in the page cache, or -1. */
  residency(fd: number, offset: number, length: number, samples: number): number;
  /** posix_fadvise(DONTNEED) over the whole file. */
  dropCache(fd: number): void;
  /** Starts a batched read (batch-read.ts builds the spec; batch_op.cc checks it again). */
  submitBatch(spec: object): { promise: Promise<unknown>; cancel(): void };
  /** One preadv2(RWF_NOWAIT) on the calling thread into `view` at `viewOffset`: bytes read, or -errno. */
  readCached(fd: number, view: ArrayBuffer | SharedArrayBuffer | ArrayBufferView, viewOffset: number, size: number, fileOffset: number): number;
}

const here = path.dirname(fileURLToPath(import.meta.url));

function locateAddon(): string {
  // dist/src/binding.js → <package root>/build/Release/penstock.node
  const candidates = [
    path.resolve(here, '../../build/Release/penstock.node'),
    path.resolve(here, '../build/Release/penstock.node'),
  ];
  for (const candidate of candidates) if (fs.existsSync(candidate)) return candidate;
  return candidates[0]!;
}

let addon: NativeAddon | undefined;

/** Loads the addon once, with one clear message when it cannot be loaded. */
export function native(): NativeAddon {
  if (addon) return addon;
  const file = locateAddon();
  try {
    const require = createRequire(import.meta.url);
    addon = require(file) as NativeAddon;
  } catch (cause) {
    const err = new Error(
      `penstock: the native addon could not be loaded from ${file}.\n` +
        `  Causes: the install step did not build it (run "npm rebuild penstock" and read its output;\n` +
        `  a C++17 compiler, make and python3 are needed), or it was built for another Node.js ABI\n` +
        `  or platform (rebuild it here). Original error: ${(cause as Error).message}`,
      { cause },
    ) as Error & { code: string };
    err.code = 'ERR_PENSTOCK_ADDON_LOAD';
    throw err;
  }
  addon.init();
  return addon;
}
