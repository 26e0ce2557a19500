/**
 * Typed errors. Every error penstock raises is an `Error` subclass with a string `code`:
 * OS errors keep Node's shape (`code` such as `ENOENT`, `errno`, `syscall`, `path`), CUDA errors
 * carry the driver's error name, cuFile errors cuFile's name and number, and misuse gets an
 * `ERR_PENSTOCK_*` code.
 */
import type { NativeErrorRecord } from './binding.js';

/** Base class of all penstock errors. */
export class PenstockError extends Error {
  /** A stable string code, e.g. `ERR_PENSTOCK_OUT_OF_RANGE`. */
  readonly code: string;
  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.name = 'PenstockError';
  }
}

/** Invalid arguments or use of a closed, freed or foreign object. */
export class PenstockUsageError extends PenstockError {
  constructor(code: string, message: string) {
    super(code, message);
    this.name = 'PenstockUsageError';
  }
}

/** An operating-system error, shaped like Node's own (`fs`) errors. */
export class PenstockSystemError extends PenstockError {
  readonly errno: number;
  readonly syscall: string;
  readonly path?: string;
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
  readonly call?: string;
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
  readonly call?: string;
  constructor(code: string, cufileCode: number, message: string, call?: string) {
    super(code, message);
    this.name = 'CuFileError';
    this.cufileCode = cufileCode;
    if (call !== undefined) this.call = call;
  }
}

/** Rejection of an operation cancelled through its AbortSignal (same shape as Node's AbortError). */
export class AbortError extends PenstockError {
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
