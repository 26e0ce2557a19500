/**
 * A checkpoint described before any data moves: the files (one safetensors file, the shards of
 * an index, a list of files, .npy files), each file's header parsed and checked, and every
 * tensor's absolute place in its file.
 */
import { contiguousStrides, type Dtype } from '../formats/dtypes.js';
import { formatError } from '../formats/errors.js';
import { NPY_MAGIC, NPY_PREFIX_BYTES, npyHeaderLength, parseNpyHeader } from '../formats/npy.js';
import { headerLengthOf, readSafetensorsEntries, type HeaderEntries } from '../formats/safetensors.js';
import { MAX_INDEX_BYTES, parseShardedIndex, type ShardedIndex } from '../formats/sharded-index.js';
import { checkOptionKeys } from '../settings/option-keys.js';
import { usage } from '../vocabulary/errors.js';
import { describe } from '../vocabulary/validate.js';
import { expandDirectories } from './model-directory.js';
import { openAnySource, readBytes, type SourceOpener } from './source.js';
import type { Source } from '../sources/source.js';
import { openSource } from '../sources/open-source.js';

/** A tensor in its file. */
export interface FileTensor {
  /** The tensor's name, unique in the checkpoint. */
  name: string;
  /** Its safetensors dtype name (`.npy` dtypes are mapped to these). */
  dtype: Dtype;
  /** Dimensions in elements; `[]` for a scalar. */
  shape: number[];
  /** Element strides as stored (C order, or Fortran order for such .npy files). */
  strides: number[];
  /** Absolute byte offset of the tensor in its file. */
  fileOffset: number;
  /** Bytes the tensor spans in its file. */
  byteLength: number;
  /** Index of its file in {@link Checkpoint.files}. */
  file: number;
}

/** One file of a checkpoint. */
export interface CheckpointFile {
  /** The file's path or URL, as given or as the index names it. */
  path: string;
  /** The file's format: `npy` for the .npy magic or extension, else `safetensors`. */
  format: 'safetensors' | 'npy';
  /** The file's size in bytes. */
  size: number;
  /** File offset of the data section (8 + header length for safetensors). */
  dataStart: number;
  /** The file's tensors, in file order. */
  tensors: FileTensor[];
  /** The safetensors `__metadata__`, when present. */
  metadata?: Record<string, string>;
  /** The open source the file is read through (closed by {@link closeCheckpoint}). */
  source: Source;
}

/** A described checkpoint (its sources open until {@link closeCheckpoint}). */
export interface Checkpoint {
  /** Every file of the checkpoint, in the order given (an index's shards in its order). */
  files: CheckpointFile[];
  /** Every tensor by name. */
  tensors: Map<string, FileTensor>;
  /** The index, when the checkpoint came from one. */
  index?: { path: string; metadata: Record<string, unknown> };
}

/**
 * What a checkpoint can be given as: a path (a file, an index, or a model directory: its
 * `model.safetensors.index.json`, else its `model.safetensors`, else its `*.safetensors` files
 * in name order), several paths, or open sources.
 */
export type CheckpointInput = string | Source | readonly (string | Source)[];

/** Options for {@link describeCheckpoint}. */
export interface DescribeOptions {
  /** Opens paths (default: local files through penstock's engine). */
  openSource?: SourceOpener;
  /** Cancels the header reads: the Promise then rejects with an AbortError, the sources it opened closed. */
  signal?: AbortSignal;
}

/** Bytes read up front from each file: enough for most headers in one read. */
const FIRST_READ = 64 * 1024;

/**
 * Opens and parses every file of a checkpoint. A `.json` path is a sharded index. Throws a
 * {@link TensorFormatError} for anything malformed, with every source closed again.
 */
export async function describeCheckpoint(input: CheckpointInput, options: DescribeOptions = {}): Promise<Checkpoint> {
  checkOptionKeys('describeCheckpoint', options);
  if (options.openSource !== undefined && typeof options.openSource !== 'function')
    throw usage('ERR_PENSTOCK_INVALID_ARGUMENT', `openSource must be a function, got ${describe(options.openSource)}`);
  if (options.signal !== undefined && !(options.signal instanceof AbortSignal))
    throw usage('ERR_PENSTOCK_INVALID_ARGUMENT', `signal must be an AbortSignal, got ${describe(options.signal)}`);
  // The default opener hears the signal too: opening a remote object waits for its server.
  const signal = options.signal;
  const opener = options.openSource ?? (signal ? (l: string) => openSource(l, { signal }) : openAnySource);
  // A model directory stands for the checkpoint in it (its index, or its safetensors files).
  const items = await expandDirectories((Array.isArray(input) ? input : [input]) as (string | Source)[]);
  const opened: Source[] = [];
  try {
    let index: (ShardedIndex & { path: string }) | undefined;
    const locations: (string | Source)[] = [];
    for (const item of items) {
      if (typeof item === 'string' && item.toLowerCase().endsWith('.json')) {
        if (items.length > 1) throw formatError('ERR_PENSTOCK_TENSOR_UNKNOWN_FORMAT', 'an index must be given alone, not in a list of files', { path: item });
        const src = await opener(item);
        opened.push(src);
        const size = await src.size();
        if (size > MAX_INDEX_BYTES)
          throw formatError('ERR_PENSTOCK_TENSOR_INDEX_INVALID', `the index is ${size} bytes, more than the ${MAX_INDEX_BYTES / 1024 / 1024} MiB an index may have`, { path: src.path });
        const text = (await readBytes(src, 0, size, options.signal)).toString('utf8');
        // Named in messages and records as its source names itself (a URL without user info).
        index = { ...parseShardedIndex(text, item), path: src.path };
        locations.push(...index.shards);
      } else locations.push(item);
    }
    // Every open is waited for, failed or not, so that the files opened beside one that failed
    // are known here and closed below (a rejection seen early would leave later opens unclosed).
    const settled = await Promise.allSettled(locations.map(async (loc) => (typeof loc === 'string' ? { s: await opener(loc), own: true } : { s: loc, own: false })));
    for (const r of settled) if (r.status === 'fulfilled' && r.value.own) opened.push(r.value.s);
    const failed = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
    const sources = settled.map((r) => (r as PromiseFulfilledResult<{ s: Source }>).value.s);
    const files = await Promise.all(sources.map((s, i) => describeFile(s, i, options.signal)));
    const cp = { files } as Checkpoint;
    // Across files a name may be taken twice, which must be refused before any data moves; within
    // one file the header reader has refused that already, so the map of a lone file is made on
    // first use (a load without a list of names never needs it: 15 000 names cost a few ms).
    if (files.length > 1 || index) cp.tensors = tensorsByName(files);
    else
      Object.defineProperty(cp, 'tensors', {
        configurable: true,
        enumerable: true,
        get: () => {
          const tensors = tensorsByName(files);
          Object.defineProperty(cp, 'tensors', { value: tensors, writable: true, configurable: true, enumerable: true });
          return tensors;
        },
      });
    if (index) {
      checkIndex(index, cp);
      cp.index = { path: index.path, metadata: index.metadata };
      await opened[0]!.close();
    }
    return cp;
  } catch (err) {
    await Promise.allSettled(opened.map((s) => s.close()));
    throw err;
  }
}

/** Every tensor of the files by name; refuses a name that two files hold. */
function tensorsByName(files: readonly CheckpointFile[]): Map<string, FileTensor> {
  const tensors = new Map<string, FileTensor>();
  for (const f of files)
    for (const t of f.tensors) {
      // One lookup per tensor: a name seen before leaves the size as it was.
      const before = tensors.size;
      tensors.set(t.name, t);
      if (tensors.size === before) {
        const other = files.find((g) => g.tensors.some((x) => x.name === t.name))!;
        throw formatError('ERR_PENSTOCK_TENSOR_DUPLICATE_NAME', `the tensor ${JSON.stringify(t.name)} is in both ${other.path} and ${f.path}`, { path: f.path, tensor: t.name });
      }
    }
  return tensors;
}

/** Closes every source the checkpoint opened. */
export async function closeCheckpoint(cp: Checkpoint): Promise<void> {
  await Promise.allSettled(cp.files.map((f) => f.source.close()));
}

function checkIndex(index: ShardedIndex & { path: string }, cp: Checkpoint): void {
  // The files are the index's shards in its order: a shard is known by its place, and named by
  // its source's own (redacted) path, never by the location opened (which may hold user info).
  const fileOf = new Map(index.shards.map((loc, i) => [loc, i]));
  for (const [name, shard] of index.weightMap) {
    const t = cp.tensors.get(name);
    const file = fileOf.get(shard)!;
    if (!t || t.file !== file)
      throw formatError('ERR_PENSTOCK_TENSOR_INDEX_MISMATCH', `the index puts ${JSON.stringify(name)} in ${cp.files[file]!.path}, which does not hold it`, { path: index.path, tensor: name });
  }
  for (const name of cp.tensors.keys())
    if (!index.weightMap.has(name))
      throw formatError('ERR_PENSTOCK_TENSOR_INDEX_MISMATCH', `${cp.files[cp.tensors.get(name)!.file]!.path} holds ${JSON.stringify(name)}, which the index does not list`, { path: index.path, tensor: name });
}

async function describeFile(source: Source, file: number, signal?: AbortSignal): Promise<CheckpointFile> {
  const path = source.path;
  const size = await source.size();
  const first = await readBytes(source, 0, Math.min(size, FIRST_READ), signal);
  const isNpy = first.length >= NPY_MAGIC.length && NPY_MAGIC.every((b, i) => first[i] === b);
  if (isNpy || path.toLowerCase().endsWith('.npy')) {
    const prefix = first.subarray(0, NPY_PREFIX_BYTES);
    const total = npyHeaderLength(prefix, size, path);
    const bytes = total <= first.length ? first : await readBytes(source, 0, total, signal);
    const h = parseNpyHeader(bytes, size, path);
    const name = (path.split('/').pop() ?? path).replace(/\.npy$/i, '');
    return {
      path, format: 'npy', size, dataStart: h.dataStart, source,
      tensors: [{ name, dtype: h.dtype, shape: h.shape, strides: h.strides, fileOffset: h.dataStart, byteLength: h.byteLength, file }],
    };
  }
  const len = headerLengthOf(first, size, path);
  const json = 8 + len <= first.length ? first.subarray(8, 8 + len) : await readBytes(source, 8, len, signal);
  if (json.length !== len) throw formatError('ERR_PENSTOCK_TENSOR_SOURCE_CHANGED', `the header could not be read whole (${json.length} of ${len} bytes)`, { path });
  const h = readSafetensorsEntries(json, size, path);
  const out: CheckpointFile = { path, format: 'safetensors', size, dataStart: h.dataStart, source, tensors: fileTensors(h, file) };
  if (h.metadata) out.metadata = h.metadata;
  return out;
}

/** A file's tensors from its header's columns, in offset order. */
function fileTensors(h: HeaderEntries, file: number): FileTensor[] {
  const { names, dtypes, shapes, begins, ends, dataStart } = h;
  const tensors: FileTensor[] = [];
  for (let k = 0; k < names.length; k++)
    tensors.push({ name: names[k]!, dtype: dtypes[k]!, shape: shapes[k]!, strides: contiguousStrides(shapes[k]!), fileOffset: dataStart + begins[k]!, byteLength: ends[k]! - begins[k]!, file });
  return tensors;
}
