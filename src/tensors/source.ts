/**
 * Where tensor bytes come from. The loader reads only through this small surface, which a
 * penstock file satisfies as it is; a remote object with the same surface plugs in the same way.
 */
import { open, type Memory, type ReadOptions } from '../engine/file.js';
import { openSource } from '../sources/open-source.js';
import type { FileRoute } from '../engine/routing.js';
import type { OpRecord } from '../engine/stats.js';

/** A readable byte source: a local file (`PenstockFile`), or anything else with the same surface. */
export interface TensorSource {
  /** Where the bytes live (a file path, or a URL such as `s3://bucket/key`); used in errors and records. */
  readonly path: string;
  /** Size in bytes. */
  size(): Promise<number>;
  /** Reads `size` bytes at `fileOffset` into `target` at `targetOffset`; resolves to the bytes read. */
  read(target: Memory, options: ReadOptions): Promise<number>;
  /** Releases the source (idempotent). */
  close(): Promise<void>;
  /** A read that also reports its route record; sources without it are recorded as what `route` says. */
  readRecorded?(target: Memory, options: ReadOptions): Promise<OpRecord>;
  /** Where device reads of this source go, and why (files); absent for sources without routes. */
  readonly route?: FileRoute;
}

/** Opens a path as a source; the default opens local files with penstock's engine. */
export type SourceOpener = (path: string) => Promise<TensorSource>;

/** Opens local files only: `open(path, 'r')`. */
export const openFileSource: SourceOpener = (path) => open(path, 'r');

/**
 * The default opener: a local path through penstock's engine, an `s3://`, `http://` or `https://`
 * URL as a remote object (credentials and endpoint from the environment and shared files).
 */
export const openAnySource: SourceOpener = (location) => openSource(location);

/** Reads `size` bytes at `offset` of a source into a new Buffer (headers, indexes). */
export async function readBytes(source: TensorSource, offset: number, size: number, signal?: AbortSignal): Promise<Buffer> {
  const buf = Buffer.alloc(size);
  const n = size === 0 ? 0 : await source.read(buf, { fileOffset: offset, size, signal });
  return n === size ? buf : buf.subarray(0, n);
}
