/**
 * Typed errors. Every error penstock raises is an `Error` subclass with a string `code`:
 * OS errors keep Node's shape (`code` such as `ENOENT`, `errno`, `syscall`, `path`), CUDA errors
 * carry the driver's error name, cuFile errors cuFile's name and number, cancellation is
 * `ABORT_ERR` (as Node's own), and misuse gets an `ERR_PENSTOCK_*` code listed in
 * {@link CORE_ERROR_CODES} (all of them: `ERROR_CODES` in `error-catalog.ts`).
 */
import type { NativeErrorRecord } from './native-contract.js';

/**
 * The codes of the core library (files, memory, the runtime, the addon), each with its one-line
 * meaning. The same kind of mistake always gets the same code.
 */
export const CORE_ERROR_CODES = {
  ERR_PENSTOCK_INVALID_ARGUMENT:
    'An argument has the wrong type or value: a length or offset that is not a non-negative integer, unknown open flags, a callback that is not a function.',
  ERR_PENSTOCK_INVALID_BUFFER: 'The memory given is not a DeviceBuffer, PinnedBuffer, Buffer, TypedArray, DataView or ArrayBuffer.',
  ERR_PENSTOCK_INVALID_SIZE: 'A buffer of zero bytes was asked for.',
  ERR_PENSTOCK_OUT_OF_RANGE: 'A range runs past the end of a buffer, an allocation or a file.',
  ERR_PENSTOCK_INVALID_DEVICE: 'No GPU has that ordinal, or the memory belongs to another GPU than the one named.',
  ERR_PENSTOCK_NOT_DEVICE_MEMORY: 'A pointer given as GPU memory is not CUDA device memory.',
  ERR_PENSTOCK_FOREIGN_BUFFER: 'A PinnedBuffer operation was given memory that penstock did not allocate.',
  ERR_PENSTOCK_FREED: 'The DeviceBuffer or PinnedBuffer (or a view of it) was already freed.',
  ERR_PENSTOCK_BUFFER_BUSY: 'The buffer cannot be freed while an operation in flight uses it.',
  ERR_PENSTOCK_NOT_REGULAR_FILE: 'The path names a FIFO, character or block device, or socket: penstock opens regular files only (found without blocking, so a FIFO never hangs an open).',
  ERR_PENSTOCK_FILE_CLOSED: 'The file was closed (or is closing).',
  ERR_PENSTOCK_NOT_READABLE: 'A read on a file opened write-only.',
  ERR_PENSTOCK_NOT_WRITABLE: 'A write on a file opened read-only.',
  ERR_PENSTOCK_BUSY: 'threads or bounceBufferSize cannot change while operations are in flight.',
  ERR_PENSTOCK_EXITING: 'Background work (a GPU warm-up, cuFile\'s driver open) was asked for while the process was exiting; it did not run.',
  ERR_PENSTOCK_ALREADY_LOADED: 'cudaLibrary or cufileLibrary cannot change once that library was loaded.',
  ERR_PENSTOCK_NO_CUDA: 'GPU memory was asked for where no CUDA driver or GPU is usable; the message says why.',
  ERR_PENSTOCK_CUFILE_REQUIRED: "compatMode 'off' requires cuFile and cuFile cannot be used for this file; the message says why.",
  ERR_PENSTOCK_CUFILE: 'cuFile loaded but its driver could not be set up (e.g. statistics could not be switched on).',
  ERR_PENSTOCK_MAPPED_UNAVAILABLE: 'The mapped route was needed but this CUDA driver has no cuMemHostRegister.',
  ERR_PENSTOCK_KEPT_STALE: "Kept pages were refused because the file's size or times changed since they were registered; penstock reads the range again through staging and records KEPT_PAGES_STALE instead of throwing it.",
  ERR_PENSTOCK_KEPT_RECENT: 'Pages were not kept because the file changed less than a second ago; penstock reads the range through staging and records KEPT_PAGES_RECENT instead of throwing it.',
  ERR_PENSTOCK_KEPT_PAST_END: 'Pages were not kept because the file no longer holds the whole range; penstock reads it through staging and records KEPT_PAGES_PAST_END instead of throwing it.',
  ERR_PENSTOCK_ADDON_LOAD: 'The native addon could not be loaded; the message names the fix for npm, pnpm and yarn.',
  ERR_PENSTOCK_INTERNAL: 'A state penstock should never reach; please report it with the message.',
  ABORT_ERR: "The operation was cancelled through its AbortSignal (Node's own code for this).",
} as const;

/** Base class of all penstock errors. */
export class PenstockError extends Error {
  /** A stable string code, e.g. `ERR_PENSTOCK_OUT_OF_RANGE`. */
  readonly code: string;
  /** An error with `code` and `message`; `cause` as for `Error`. */
  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.name = 'PenstockError';
  }
}

/** Invalid arguments or use of a closed, freed or foreign object. */
export class PenstockUsageError extends PenstockError {
  /** A usage error with its `ERR_PENSTOCK_*` code. */
  constructor(code: string, message: string) {
    super(code, message);
    this.name = 'PenstockUsageError';
  }
}

/** An operating-system error, shaped like Node's own (`fs`) errors. */
export class PenstockSystemError extends PenstockError {
  /** The OS error number, negated as Node reports it (e.g. -2 for ENOENT). */
  readonly errno: number;
  /** The system call that failed, e.g. `open` or `pread`. */
  readonly syscall: string;
  /** The file concerned, where there is one. */
  readonly path?: string;
  /** An OS error; the message is built as Node's are (`ENOENT: …, open '/x'`). */
  constructor(code: string, errno: number, syscall: string, message: string, path?: string) {
    super(code, `${code}: ${message}, ${syscall}${path !== undefined ? ` '${path}'` : ''}`);
    this.name = 'PenstockSystemError';
    // Node reports errno negated (uv convention); keep that shape.
    this.errno = -Math.abs(errno);
    this.syscall = syscall;
    if (path !== undefined) this.path = path;
  }
}

/** A CUDA driver call failed; `code` is the driver's name, e.g. `CUDA_ERROR_OUT_OF_MEMORY`. */
export class CudaError extends PenstockError {
  /** The numeric CUresult. */
  readonly cudaCode: number;
  /** The driver call that failed, e.g. `cuMemAlloc`. */
  readonly call?: string;
  /** A CUDA error with the driver's name and number. */
  constructor(code: string, cudaCode: number, message: string, call?: string) {
    super(code, message);
    this.name = 'CudaError';
    this.cudaCode = cudaCode;
    if (call !== undefined) this.call = call;
  }
}

/** A cuFile call failed; `code` is cuFile's name, e.g. `CU_FILE_HANDLE_NOT_REGISTERED`. */
export class CuFileError extends PenstockError {
  /** The numeric cuFile status (5000 + n). */
  readonly cufileCode: number;
  /** The cuFile call that failed, e.g. `cuFileRead`. */
  readonly call?: string;
  /** A cuFile error with cuFile's name and number. */
  constructor(code: string, cufileCode: number, message: string, call?: string) {
    super(code, message);
    this.name = 'CuFileError';
    this.cufileCode = cufileCode;
    if (call !== undefined) this.call = call;
  }
}

/** Rejection of an operation cancelled through its AbortSignal (same shape as Node's AbortError). */
export class AbortError extends PenstockError {
  /** An abort, with `code` `ABORT_ERR`. */
  constructor(message = 'The operation was aborted', options?: { cause?: unknown }) {
    super('ABORT_ERR', message, options);
    this.name = 'AbortError';
  }
}

/** Turns a native error record into the matching typed error. */
export function fromRecord(record: NativeErrorRecord, path?: string): PenstockError {
  switch (record.kind) {
    case 'os':
      return new PenstockSystemError(record.code, record.errno ?? 0, record.syscall ?? 'unknown', record.message, path);
    case 'cuda':
      return new CudaError(record.code, record.number ?? -1, record.message, record.syscall);
    case 'cufile':
      return new CuFileError(record.code, record.number ?? -1, record.message, record.syscall);
    case 'abort':
      return new AbortError();
    default:
      return new PenstockError(record.code, record.message);
  }
}

/** Converts whatever native code threw (a record, or a plain Error carrying one) into a typed error. */
export function fromNative(err: unknown, path?: string): Error {
  if (err instanceof PenstockError) return err;
  if (err && typeof err === 'object') {
    const rec = (err as { record?: NativeErrorRecord }).record;
    if (rec) return fromRecord(rec, path);
    if ('kind' in err && 'code' in err) return fromRecord(err as NativeErrorRecord, path);
  }
  return err instanceof Error ? err : new PenstockError('ERR_PENSTOCK_INTERNAL', String(err));
}

/** Shorthand for usage errors. */
export function usage(code: string, message: string): PenstockUsageError {
  return new PenstockUsageError(code, message);
}

/** @internal Node's own fs errors, made instances of PenstockSystemError with the same fields. */
export function systemError(err: NodeJS.ErrnoException): Error {
  if (!err.code || err.errno === undefined) return err;
  const msg = err.message.replace(/^[A-Z]+: /, '').replace(/, \w+ '.*'$/, '');
  return fromNative({ kind: 'os', code: err.code, message: msg, errno: Math.abs(err.errno), syscall: err.syscall ?? 'open' }, err.path);
}
