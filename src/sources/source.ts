/**
 * The one surface every byte source offers its readers: a local file (`PenstockFile`), a remote
 * object (`RemoteObject`), or anything a caller brings with the same shape. Loaders, checkpoint
 * readers and the CLI read only through it.
 */
import type { Memory, ReadOptions } from '../engine/file.js';
import type { FileRoute } from '../engine/routing.js';
import type { OpRecord } from '../engine/op-record.js';
import type { RemoteOpRecord } from './remote/stats.js';

/** What one recorded read reports: an engine operation's record (files) or a remote read's. */
export type SourceRecord = OpRecord | RemoteOpRecord;

/** A readable byte source: a local file, a remote object, or anything else with the same surface. */
export interface Source {
  /** Where the bytes live (a file path, or a redacted URL such as `s3://bucket/key`); used in errors and records. */
  readonly path: string;
  /** Resolves to the size in bytes. */
  size(): Promise<number>;
  /** Reads `size` bytes at `fileOffset` into `target` at `targetOffset`; resolves to the bytes read (fewer only at the end). */
  read(target: Memory, options: ReadOptions): Promise<number>;
  /** Releases the source once its reads in flight settle (idempotent). */
  close(): Promise<void>;
  /** A read that also reports its record; sources without it are recorded as what `route` says. */
  readRecorded?(target: Memory, options: ReadOptions): Promise<SourceRecord>;
  /** Where device reads of this source go, and why (files); absent for sources without routes. */
  readonly route?: FileRoute;
}

/** Opens a path or URL as a source. */
export type SourceOpener = (location: string) => Promise<Source>;

/** Whether a record is a remote read's (its requests are its operations). */
export function isRemoteRecord(r: SourceRecord): r is RemoteOpRecord {
  return r.route === 'remote-host' || r.route === 'remote-device';
}

/** Reads `size` bytes at `offset` of a source into a new Buffer (headers, indexes). */
export async function readBytes(source: Source, offset: number, size: number, signal?: AbortSignal): Promise<Buffer> {
  const buf = Buffer.alloc(size);
  const n = size === 0 ? 0 : await source.read(buf, { fileOffset: offset, size, ...(signal ? { signal } : {}) });
  return n === size ? buf : buf.subarray(0, n);
}
