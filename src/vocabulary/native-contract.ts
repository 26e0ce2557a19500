/**
 * The contract with the native addon, typed in one private place: every function it exports and
 * every field of the plain data it returns. Nothing here is public API: the classes in the other
 * modules wrap it, validate every argument before it gets there, and turn the plain error records
 * it produces into typed errors. `test/addon/contract.test.ts` checks the loaded addon against it.
 */
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
  /** Required symbols that were missing, comma-separated. */
  missing?: string;
}

/** What loading the CUDA driver library (libcuda) and `cuInit` came to in this process. */
export interface CudaStatus extends LibraryStatus {
  /** Whether `cuInit` succeeded; false when the library did not load or init failed. */
  initialized: boolean;
  /** Why `cuInit` failed; present only when the library loaded and init did not succeed. */
  initError?: NativeErrorRecord;
  /** The driver's CUDA version as `cuDriverGetVersion` gives it (e.g. 12040 for 12.4); present once the library loaded. */
  driverVersion?: number;
  /** GPUs the driver sees; present only once `cuInit` succeeded. */
  deviceCount?: number;
  /** Whether the loaded driver has cuMemHostRegister/cuMemHostUnregister (the mapped route needs them). */
  hostRegister?: boolean;
  /**
   * The driver's entry point for many copies in one call (`cuMemcpyBatchAsync_v2` on CUDA 13
   * drivers, `cuMemcpyBatchAsync` on 12.8–12.9); absent where the driver has none.
   */
  copyBatch?: string;
}

/** One GPU as the CUDA driver describes it. */
export interface NativeDeviceInfo {
  /** The device's CUDA ordinal (0-based). */
  ordinal: number;
  /** The device's marketing name, e.g. "NVIDIA H100 80GB HBM3". */
  name: string;
  /** Total device memory in bytes. */
  totalMemory: number;
  /** PCI bus id in `domain:bus:device.function` form. */
  pciBusId: string;
  /** Compute capability as `[major, minor]`. */
  computeCapability: [number, number];
}

/** cuFile driver properties (`cuFileDriverGetProperties`), as the loaded driver reports them. */
export interface CuFileDriverProps {
  /** Major version of the nvidia-fs kernel driver. */
  nvfsMajor: number;
  /** Minor version of the nvidia-fs kernel driver. */
  nvfsMinor: number;
  /** Reads and writes up to this size (KiB) are polled for completion instead of waiting on an interrupt. */
  pollThresholdKiB: number;
  /** Largest single direct I/O the driver issues (KiB); larger requests are split. */
  maxDirectIoKiB: number;
  /** Bit set of the storage back-ends the driver supports (decoded by `penstock doctor`). */
  dstatusflags: number;
  /** Bit set of the driver's control flags (poll mode, compat mode). */
  dcontrolflags: number;
  /** Bit set of the driver's feature flags (e.g. batch I/O, streams). */
  fflags: number;
  /** Most GPU memory (KiB) the driver keeps as internal bounce cache, over all buffers. */
  maxDeviceCacheKiB: number;
  /** GPU bounce cache per buffer (KiB). */
  perBufferCacheKiB: number;
  /** Most GPU memory (KiB) that may be registered (pinned) with cuFile at once. */
  maxDevicePinnedKiB: number;
  /** Most I/Os one cuFile batch may hold. */
  maxBatchIo: number;
  /** Longest a cuFile batch may wait for completion (ms). */
  maxBatchIoTimeoutMs: number;
}

/** What loading libcufile and opening the cuFile driver came to in this process. */
export interface CuFileStatus extends LibraryStatus {
  /** The libcufile version (`cuFileGetVersion`, e.g. 1130 for 1.13); absent when unknown. */
  version?: number;
  /** Whether `cuFileDriverOpen` succeeded, so direct (GDS) reads can be tried. */
  driverOpen: boolean;
  /** Present (true) while the driver is being opened on a background thread. */
  driverOpening?: boolean;
  /** Why the driver did not open; present only when opening was tried and failed. */
  driverError?: NativeErrorRecord;
  /** The driver's properties; present once the driver opened and reported them. */
  props?: CuFileDriverProps;
  /** Whether level-3 statistics could be switched on (they separate direct from POSIX reads). */
  statsLevel: number;
  /** Why level-3 statistics are off; present only while the driver is open and they could not be switched on. */
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

/**
 * One operation as native code sees it: plain data, validated in TypeScript. Native code reads
 * exactly the keys of its route, each of them required (it assumes no value), and refuses any
 * other key.
 */
export type NativeOpSpec = NativeHostSpec | NativeStagedSpec | NativeCuFileSpec;

interface NativeSpecBase {
  write: boolean;
  fd: number;
  /** A second descriptor opened with O_DIRECT, or -1. */
  directFd: number;
  fileOffset: number;
  size: number;
  taskSize: number;
  /** Buffered writes through cache-sized scratch: host writes in pieces of this size, staged writes piece by piece (0: none). */
  writePiece: number;
  /** At most this many tasks in flight (0: one per pool thread). */
  maxRunners: number;
  progress?: (bytesDone: number) => void;
}

export interface NativeHostSpec extends NativeSpecBase {
  route: 'posix-host';
  /** The host memory: native code takes its address and size from the engine, never from properties. */
  host: ArrayBufferView | ArrayBuffer;
  /** Byte offset inside `host`. */
  hostOffset: number;
  /** Host reads through cache-sized scratch and streaming stores, in pieces of this size (0: straight into the target). */
  hostStagePiece: number;
  /** Reads and writes through O_DIRECT: bytes per piece of aligned scratch (positive when `directFd` is open). */
  directPiece: number;
}

export interface NativeStagedSpec extends NativeSpecBase {
  route: 'posix-device';
  devicePtr: bigint;
  device: number;
  /** Bytes per copy through a bounce half (a positive multiple of 4096; at most a half is used). */
  stagePiece: number;
  /** Staged device reads: whether one worker also carries pieces from the range's end by registering page-cache pages. */
  mapped: boolean;
  /** Bytes per mapped piece (positive when `mapped`). */
  mappedPiece: number;
  /** A mapped claim takes at most 1/this of the tasks left (positive when `mapped`). */
  mappedClaimDivisor: number;
  /** Buffered staged reads: bytes per pread into cache-sized scratch, streamed into the bounce half (0: pread into the half). */
  stageScratch: number;
  /**
   * Buffered reads through scratch: gather into the device's stage and copy the finished prefix
   * to the GPU in order, in copies of at least this many bytes (0 or absent: through the bounce
   * halves; so too when the stage is too small or another operation holds it).
   */
  gatherCopy?: number;
}

export interface NativeCuFileSpec extends NativeSpecBase {
  route: 'cufile';
  devicePtr: bigint;
  device: number;
  /** Registered cuFile handle id. */
  cufileHandle: number;
  /** Base pointer handed to cuFile and the offset from it. */
  cufileBase: bigint;
  cufileBaseOffset: number;
}

/** One share of an operation's work: the tasks and bytes it carried and the thread time it took. */
export interface NativeWorkShare {
  tasks: number;
  bytes: number;
  /** Sum of task durations, nanoseconds (thread time spent on this share). */
  busyNs: number;
  /** Of that, time inside read/write system calls (for the mapped share: pinning and unpinning). */
  ioNs: number;
  /** Of that, time waiting for copies to or from the GPU. */
  waitNs: number;
}

/** What the mapped runner carried of a staged device read. */
export interface NativeMappedResult extends NativeWorkShare {
  /** Why it stopped early (registration refused, mmap failed); the staged path carried the rest. */
  error?: Error & { code?: string };
}

/**
 * When an operation (or a batch) passed its milestones, in nanoseconds on the monotonic clock
 * that `process.hrtime.bigint()` reads: started (main thread), first task began (a worker), the
 * last of the tasks taken by the runners queued at the start began (how long waking the pool
 * took), last task finished (its last copy seen complete, for staged reads), drained, and its
 * result built (main thread, just before the promise settles). 0: not reached (an empty
 * operation has no tasks).
 */
export interface NativeOpTimeline {
  startNs: number;
  firstTaskNs: number;
  lastRunnerStartNs: number;
  lastTaskEndNs: number;
  drainedNs: number;
  settleNs: number;
}

export interface NativeOpResult {
  /** Bytes moved: the size, or less where the file ended. */
  bytes: number;
  /** Tasks the operation was cut into. */
  tasks: number;
  /** The most tasks of this operation that ran at once (the mapped runner not counted). */
  peakTasks: number;
  /** The share the operation's own route carried: all of it but the mapped share. */
  routeShare: NativeWorkShare;
  /** Present when a mapped share was planned; its work is not in `routeShare`. */
  mapped?: NativeMappedResult;
  /** Pieces that the file system refused through O_DIRECT (EINVAL) and that went buffered instead. */
  directFallback?: { pieces: number; record: NativeErrorRecord };
  /** Present when the read was gathered (NativeStagedSpec.gatherCopy): the copies that carried its stage to the GPU. */
  orderedCopies?: number;
  /** Where its time went: the hop to a worker, the work, the hop back. */
  timeline: NativeOpTimeline;
}

/** What a batch (batch_bindings.cc) resolves with. */
export interface NativeBatchResult {
  preads: number;
  copies: number;
  /** Batch calls (`cuMemcpyBatchAsync`) that carried some of `copies`. */
  copyBatches: number;
  /** Fills of a bounce half that needed `copyBatchMin` copies or more but issued them one call each. */
  unbatchedFills: number;
  busyNs: number;
  ioNs: number;
  waitNs: number;
  /** Reads that failed, by index into the plan's reads, each with its error record. */
  readErrors: { read: number; error: unknown }[];
  /** Where its time went: the hop to the workers, waking them, the work, the hop back. */
  timeline: NativeOpTimeline;
  /** Of `preads`, reads issued through io_uring (many to one system call). */
  ringReads: number;
  /** Why reads that the plan gave a ring went by pread instead (the first such error), or null. */
  ringError: NativeErrorRecord | null;
}

/** The handle of every job the addon starts (an operation or a batch): one shape, one `cancel`. */
export interface NativeOp<Result = NativeOpResult> {
  promise: Promise<Result>;
  /** The job's id within this environment (what `cancel` goes by). */
  id: number;
  /** Cancels the operation: called as a method of this handle (one function serves them all). */
  cancel(): void;
}

/** What the driver says about the allocation behind a pointer; absent where it did not answer. */
export interface NativeIpcPointerFacts {
  rangeStart?: bigint;
  rangeSize?: number;
  /** CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE. */
  legacyIpcCapable?: boolean;
  /** CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE is not null. */
  fromPool?: boolean;
}

export interface NativeAddon {
  /** Sizes the pool; an idle worker watches the queue `spinNs` before sleeping, at most `spinners` at once. */
  setThreads(n: number, spinNs: number, spinners: number): void;
  poolInfo(): { threads: number };
  cudaLoad(path: string): CudaStatus;
  /** Loads the driver and retains `ordinal`'s primary context on a background thread. */
  cudaWarmup(path: string, ordinal: number): Promise<void>;
  cudaStatus(): CudaStatus;
  deviceInfo(ordinal: number): NativeDeviceInfo;
  /** Retains the primary context and allocates bounce buffers for the current pool size. */
  devicePrepare(ordinal: number, bounceBytes: number, numaNode: number, inlineBytes: number, gatherBytes: number): void;
  /** Allocates, on a background thread, the first `slots` workers' bounce buffers and the gather stage. */
  deviceFill(ordinal: number, slots: number): Promise<void>;
  deviceAlloc(ordinal: number, size: number): bigint;
  deviceFree(ordinal: number, ptr: bigint): void;
  /** Owning device, base and size of a device allocation, or throws for a non-device pointer. */
  pointerInfo(ptr: bigint): { device: number; base: bigint; size: number };
  memGetInfo(ordinal: number): { free: number; total: number };
  copyHostToDevice(ordinal: number, dst: bigint, src: ArrayBufferView | ArrayBuffer, srcOffset: number, size: number): NativeOp;
  copyDeviceToHost(ordinal: number, dst: ArrayBufferView | ArrayBuffer, dstOffset: number, src: bigint, size: number): NativeOp;
  pinnedAlloc(size: number): ArrayBuffer;
  /** Detaches the ArrayBuffer (so views become empty) and frees the pinned memory. */
  pinnedFree(buffer: ArrayBuffer): void;
  pinnedBytes(): number;
  cufileLoad(path: string): CuFileStatus;
  cufileStatus(): CuFileStatus;
  /** Opens the cuFile driver (device `ordinal`'s context current), switching on stats first. */
  cufileDriverOpen(ordinal: number): CuFileStatus;
  /** Opens cuFile's driver on a background thread; the status then tells how it went. */
  cufileDriverOpenAsync(ordinal: number): Promise<void>;
  cufileRegister(fd: number): { handle?: number; error?: NativeErrorRecord };
  cufileDeregister(handle: number): void;
  cufileStats(): CuFileGpuCounters[] | null;
  submit(spec: NativeOpSpec): NativeOp;
  /** Jobs (operations and batches) started in this environment and not yet settled. */
  inflight(): number;
  /** Fraction of sampled pages of a file range (the part inside the file) in the page cache, or -1. */
  residency(fd: number, offset: number, length: number, samples: number): number;
  /** posix_fadvise(DONTNEED) over the whole file. */
  dropCache(fd: number): void;
  /** getsockopt(SO_PEERCRED) of a connected Unix socket: the peer's pid, uid and gid at connect time. */
  peerCredentials(fd: number): NativePeerCredentials;
  /** Whether the driver has the CUDA IPC entry points; `missing` names those it lacks. */
  ipcStatus(): { available: boolean; missing?: string };
  /** A random id of this process (32 hexadecimal digits), the same in every worker thread. */
  ipcProcessId(): string;
  ipcPointerFacts(ordinal: number, ptr: bigint): NativeIpcPointerFacts;
  /** cuIpcGetMemHandle in the GPU's primary context: the 64 handle bytes. */
  ipcGetMemHandle(ordinal: number, ptr: bigint): Buffer;
  /** cuIpcOpenMemHandle in the GPU's primary context: the base of the mapping. */
  ipcOpenMemHandle(ordinal: number, handle: Uint8Array, flags: number): bigint;
  ipcCloseMemHandle(ordinal: number, ptr: bigint): void;
  /** cuDeviceGetByPCIBusId: the ordinal of the GPU at that bus id in this process. */
  deviceByPciBusId(busId: string): number;
  /** Starts a batched read (batch-read.ts builds the spec; batch_bindings.cc checks it again). */
  submitBatch(spec: object): NativeOp<NativeBatchResult>;
  /** One preadv2(RWF_NOWAIT) on the calling thread into `view` at `viewOffset`: bytes read, or -errno. */
  readCached(fd: number, view: ArrayBuffer | SharedArrayBuffer | ArrayBufferView, viewOffset: number, size: number, fileOffset: number): number;
  /**
   * Reads `size` bytes from the page cache into the device's inline staging and copies them to
   * `devicePtr`, on the calling thread, in pieces of `piece` bytes that `helpers` pool tasks help
   * read (each through the reader's cache-sized scratch and streaming stores, with `scratch`):
   * `size` once the bytes are on the GPU, else -errno or a short count (the bytes at
   * `devicePtr` then undefined); -EBUSY while another thread uses the staging. `report[0]` is
   * set to the pieces that helpers read.
   */
  readCachedToDevice(fd: number, device: number, devicePtr: bigint, size: number, fileOffset: number, piece: number, helpers: number, scratch: boolean, report: Uint32Array): number;
  /**
   * Copies `size` bytes at `fileOffset` of kept span `id` to `devicePtr` on the calling thread
   * (the device's inline stream), once `fd`'s stamp is checked against the span's: `size`, or
   * -EBUSY while another thread uses that stream. Throws ERR_PENSTOCK_KEPT_STALE for a changed file.
   */
  readKept(id: number, fd: number, fileOffset: number, size: number, device: number, devicePtr: bigint): number;
  /** Starts a read of kept pages on the pool, registering the range under `id` first when `keep`. */
  submitKept(spec: NativeKeptSpec): NativeOp;
  /** Drops span `id` (its pages go once no read in flight uses them); false for an unknown id. */
  keptRelease(id: number): boolean;
  /** Bytes of page-cache pages kept registered, process-wide. */
  keptBytes(): number;
  /**
   * A safetensors header (the JSON and its padding) in the plain form writers produce, as
   * columns; null for any other header, which the strict reader then reads or refuses.
   */
  scanSafetensorsHeader(bytes: Uint8Array): NativeHeaderScan | null;
}

/** A safetensors header read by `scanSafetensorsHeader`: one entry per tensor in each column, in header order. */
export interface NativeHeaderScan {
  /** Tensors. */
  count: number;
  /** The names in order, joined by `\n` (which no name in the plain form holds) into strings of up to about 64 KiB. */
  names: string[];
  /** The distinct dtype strings, as written (unchecked). */
  dtypes: string[];
  /** Per tensor, its dtype's index in `dtypes`. */
  dtype: Uint32Array;
  /** Per tensor, its number of dimensions; the dimensions follow each other in `dims`. */
  rank: Uint32Array;
  dims: Float64Array;
  /** Per tensor, its data_offsets pair. */
  offsets: Float64Array;
  /** The byte range of `__metadata__`'s JSON text, unread; absent without metadata. */
  metadataAt?: number;
  metadataLength?: number;
}

/** The process at the other end of a Unix socket, as the kernel recorded it at connect time. */
export interface NativePeerCredentials {
  pid: number;
  uid: number;
  gid: number;
}

/** A read of kept pages on the pool (kept_pages.cc). */
export interface NativeKeptSpec {
  id: number;
  /** Register the range under `id` first (refused for a file changed within `settleNs`). */
  keep: boolean;
  /**
   * Check the span and queue its one copy on the calling thread, so the pool's task only waits
   * for it (never with `keep`; `taskSize` must cover the whole read).
   */
  issue: boolean;
  fd: number;
  fileOffset: number;
  size: number;
  /** Bytes per copy task; the whole size when it keeps. */
  taskSize: number;
  device: number;
  devicePtr: bigint;
  settleNs: number;
  progress?: (bytes: number) => void;
}

/** Each field of `T`, marked as native code always setting it or setting it only sometimes. */
export type NativeFieldPresence<T> = { [K in keyof T]-?: undefined extends T[K] ? 'optional' : 'required' };

/**
 * Every function the addon exports, in one list that `NativeAddon` is checked against (below) and
 * that the contract test compares with the loaded addon.
 */
export const NATIVE_FUNCTIONS = [
  'setThreads', 'poolInfo', 'cudaLoad', 'cudaWarmup', 'cudaStatus', 'deviceInfo', 'devicePrepare', 'deviceFill', 'deviceAlloc', 'deviceFree',
  'pointerInfo', 'memGetInfo', 'copyHostToDevice', 'copyDeviceToHost', 'pinnedAlloc', 'pinnedFree', 'pinnedBytes',
  'cufileLoad', 'cufileStatus', 'cufileDriverOpen', 'cufileDriverOpenAsync', 'cufileRegister', 'cufileDeregister', 'cufileStats', 'submit',
  'inflight', 'residency', 'dropCache', 'peerCredentials', 'ipcStatus', 'ipcProcessId', 'ipcPointerFacts', 'ipcGetMemHandle',
  'ipcOpenMemHandle', 'ipcCloseMemHandle', 'deviceByPciBusId', 'submitBatch', 'readCached', 'readCachedToDevice',
  'readKept', 'submitKept', 'keptRelease', 'keptBytes', 'scanSafetensorsHeader',
] as const;

// Fails to compile when NativeAddon and NATIVE_FUNCTIONS differ by a name either way.
type SameKeys<A, B> = [A] extends [B] ? ([B] extends [A] ? true : never) : never;
const nativeFunctionsMatch: SameKeys<keyof NativeAddon, (typeof NATIVE_FUNCTIONS)[number]> = true;
void nativeFunctionsMatch;

/**
 * The fields of each plain object the addon returns, as typed above; `satisfies` makes each map
 * exactly the type's keys, so a field added to a type and not here (or the reverse) fails to compile.
 */
export const NATIVE_RESULT_FIELDS = {
  errorRecord: { kind: 'required', code: 'required', message: 'required', errno: 'optional', syscall: 'optional', number: 'optional' } satisfies NativeFieldPresence<NativeErrorRecord>,
  cudaStatus: {
    loaded: 'required', path: 'required', resolvedPath: 'optional', error: 'optional', missing: 'optional',
    initialized: 'required', initError: 'optional', driverVersion: 'optional', deviceCount: 'optional', hostRegister: 'optional', copyBatch: 'optional',
  } satisfies NativeFieldPresence<CudaStatus>,
  cufileStatus: {
    loaded: 'required', path: 'required', resolvedPath: 'optional', error: 'optional', missing: 'optional',
    version: 'optional', driverOpen: 'required', driverOpening: 'optional', driverError: 'optional', props: 'optional', statsLevel: 'required', statsError: 'optional',
  } satisfies NativeFieldPresence<CuFileStatus>,
  cufileDriverProps: {
    nvfsMajor: 'required', nvfsMinor: 'required', pollThresholdKiB: 'required', maxDirectIoKiB: 'required', dstatusflags: 'required',
    dcontrolflags: 'required', fflags: 'required', maxDeviceCacheKiB: 'required', perBufferCacheKiB: 'required',
    maxDevicePinnedKiB: 'required', maxBatchIo: 'required', maxBatchIoTimeoutMs: 'required',
  } satisfies NativeFieldPresence<CuFileDriverProps>,
  cufileGpuCounters: {
    totalReads: 'required', p2pReads: 'required', nvfsReads: 'required', posixReads: 'required', unalignedReads: 'required',
    readErrors: 'required', nvfsWrites: 'required', posixWrites: 'required', registeredBytes: 'required',
  } satisfies NativeFieldPresence<CuFileGpuCounters>,
  cufileRegister: { handle: 'optional', error: 'optional' } satisfies NativeFieldPresence<ReturnType<NativeAddon['cufileRegister']>>,
  deviceInfo: { ordinal: 'required', name: 'required', totalMemory: 'required', pciBusId: 'required', computeCapability: 'required' } satisfies NativeFieldPresence<NativeDeviceInfo>,
  pointerInfo: { device: 'required', base: 'required', size: 'required' } satisfies NativeFieldPresence<ReturnType<NativeAddon['pointerInfo']>>,
  memGetInfo: { free: 'required', total: 'required' } satisfies NativeFieldPresence<ReturnType<NativeAddon['memGetInfo']>>,
  poolInfo: { threads: 'required' } satisfies NativeFieldPresence<ReturnType<NativeAddon['poolInfo']>>,
  peerCredentials: { pid: 'required', uid: 'required', gid: 'required' } satisfies NativeFieldPresence<NativePeerCredentials>,
  ipcStatus: { available: 'required', missing: 'optional' } satisfies NativeFieldPresence<ReturnType<NativeAddon['ipcStatus']>>,
  ipcPointerFacts: { rangeStart: 'optional', rangeSize: 'optional', legacyIpcCapable: 'optional', fromPool: 'optional' } satisfies NativeFieldPresence<NativeIpcPointerFacts>,
  op: { promise: 'required', id: 'required', cancel: 'required' } satisfies NativeFieldPresence<NativeOp>,
  opResult: {
    bytes: 'required', tasks: 'required', peakTasks: 'required', routeShare: 'required', mapped: 'optional', directFallback: 'optional',
    orderedCopies: 'optional', timeline: 'required',
  } satisfies NativeFieldPresence<NativeOpResult>,
  batchResult: {
    preads: 'required', copies: 'required', copyBatches: 'required', unbatchedFills: 'required', busyNs: 'required', ioNs: 'required', waitNs: 'required', readErrors: 'required', timeline: 'required',
    ringReads: 'required', ringError: 'required',
  } satisfies NativeFieldPresence<NativeBatchResult>,
  timeline: {
    startNs: 'required', firstTaskNs: 'required', lastRunnerStartNs: 'required', lastTaskEndNs: 'required', drainedNs: 'required', settleNs: 'required',
  } satisfies NativeFieldPresence<NativeOpTimeline>,
  workShare: { tasks: 'required', bytes: 'required', busyNs: 'required', ioNs: 'required', waitNs: 'required' } satisfies NativeFieldPresence<NativeWorkShare>,
  directFallback: { pieces: 'required', record: 'required' } satisfies NativeFieldPresence<NonNullable<NativeOpResult['directFallback']>>,
  headerScan: {
    count: 'required', names: 'required', dtypes: 'required', dtype: 'required', rank: 'required', dims: 'required', offsets: 'required',
    metadataAt: 'optional', metadataLength: 'optional',
  } satisfies NativeFieldPresence<NativeHeaderScan>,
  mappedResult: { tasks: 'required', bytes: 'required', busyNs: 'required', ioNs: 'required', waitNs: 'required', error: 'optional' } satisfies NativeFieldPresence<NativeMappedResult>,
} as const;
