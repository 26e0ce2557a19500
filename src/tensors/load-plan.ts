/**
 * What a load reads and where each byte lands: the tensors chosen by a filter, the row range of
 * each 2-D tensor for tensor-parallel shards, the file spans that cover them (neighbouring
 * regions coalesced into one read), and the slab layout (each span at an aligned slab offset,
 * tensors inside it at their distance from the span's start).
 */
import { dtypeBits, type Dtype } from '../formats/dtypes.js';
import { formatError } from '../formats/errors.js';
import { usage } from '../vocabulary/errors.js';
import { describe, isLength } from '../vocabulary/validate.js';
import { checkOptionKeys } from '../settings/option-keys.js';
import type { Checkpoint, FileTensor } from './checkpoint.js';

/** Which tensors to load: names, a name prefix, or a predicate over the name. */
export type TensorFilter = readonly string[] | { prefix: string } | ((name: string) => boolean);

/** A tensor-parallel shard: rows `[floor(index·R/count), floor((index+1)·R/count))` of every 2-D tensor. */
export interface RowShard {
  /** This shard's number, 0 ≤ index < count. */
  index: number;
  /** How many shards the rows are split into (≥ 1). */
  count: number;
}

/** Slab offsets of spans are multiples of this (the alignment CUDA allocations themselves have). */
export const SLAB_ALIGNMENT = 256;

/** A tensor as it will land in the slab. */
export interface PlannedTensor {
  /** The tensor's name. */
  name: string;
  /** Its safetensors dtype name. */
  dtype: Dtype;
  /** The shape loaded (the row range's rows for a sliced 2-D tensor). */
  shape: number[];
  /** Element strides as stored in the file. */
  strides: number[];
  /** Where its bytes are in the file. */
  file: number;
  /** Absolute byte offset in the file of the bytes loaded (the first row taken, for a sliced tensor). */
  fileOffset: number;
  /** Bytes loaded (the row range's bytes for a sliced tensor). */
  byteLength: number;
  /** Byte offset in the slab. */
  byteOffset: number;
  /** The rows taken, for a sliced tensor, and the full row count. */
  rows?: { begin: number; end: number; of: number };
  /**
   * With `alignElements`: the slab offset where the span's read leaves this tensor's bytes when
   * that is not a multiple of its element size; the loader copies them from there to
   * `byteOffset`, which is.
   */
  copyFrom?: number;
}

/** One engine read: a contiguous file range into a contiguous slab range. */
export interface Span {
  /** Index of the file in {@link Checkpoint.files}. */
  file: number;
  /** Absolute byte offset in the file where the read starts. */
  fileOffset: number;
  /** Bytes the read covers. */
  size: number;
  /** Byte offset in the slab where they land (a multiple of {@link SLAB_ALIGNMENT}). */
  slabOffset: number;
}

/** The whole plan. */
export interface LoadPlan {
  /** The chosen tensors, in checkpoint order, each with its slab offset. */
  tensors: PlannedTensor[];
  /** The reads to issue, by file and file offset; neighbouring tensors share one. */
  spans: Span[];
  /** Slab bytes needed. */
  slabBytes: number;
  /** Bytes the spans read (tensor bytes plus coalesced gaps). */
  readBytes: number;
}

/** Options of {@link planLoad}. */
export interface PlanOptions {
  /** Which tensors to load (default: all). */
  filter?: TensorFilter;
  /** The row shard of each C-ordered 2-D tensor to load (default: whole tensors). */
  rows?: RowShard;
  /** Gaps up to this many bytes between chosen regions are read through rather than split into two reads (default 1 MiB). */
  coalesceGap?: number;
  /**
   * Give every tensor a slab offset that is a multiple of its element size (so that a typed
   * array can view it): a tensor that its span's read leaves misaligned (a file whose tensors
   * do not start on multiples of their element size) gets a place of its own at the end of the
   * slab, and `copyFrom` says where to copy it from. Default false.
   */
  alignElements?: boolean;
}

/** Plans a load of a described checkpoint. */
export function planLoad(cp: Checkpoint, options: PlanOptions = {}): LoadPlan {
  checkOptionKeys('planLoad', options);
  const chosen = select(cp, options.filter);
  const rows = options.rows;
  if (rows && (!Number.isInteger(rows.count) || rows.count < 1 || !Number.isInteger(rows.index) || rows.index < 0 || rows.index >= rows.count))
    throw formatError('ERR_PENSTOCK_TENSOR_ROW_SPLIT', `row shard ${rows.index} of ${rows.count} is not a shard (0 ≤ index < count, both integers)`);
  const gap = options.coalesceGap ?? 1 << 20;
  if (!isLength(gap)) throw usage('ERR_PENSTOCK_INVALID_ARGUMENT', `coalesceGap must be a non-negative integer, got ${describe(gap)}`);
  const regions = chosen.map((t) => region(t, rows));
  // Each pass over the tensors is a function of its own that returns as its loop ends (see
  // layOut), so that V8 keeps it optimised from one load to the next.
  const { tensors, spans, cursor } = layOut(regions, cp.files.length, gap);
  let readBytes = 0;
  for (const s of spans) readBytes += s.size;
  let end = slabEnd(tensors, cursor);
  if (options.alignElements) end = alignElements(tensors, end);
  return { tensors, spans, slabBytes: end, readBytes };
}

/**
 * The spans that cover the regions (neighbours within `gap` coalesced) and every tensor's slab
 * offset. A pass of its own: V8 optimises a long loop while it runs, and code after it that had
 * not yet run would deoptimise it again on every load.
 */
function layOut(regions: Region[], files: number, gap: number): { tensors: PlannedTensor[]; spans: Span[]; cursor: number } {
  // Placed at their index in `regions`: the plan keeps checkpoint order without sorting again.
  const tensors = new Array<PlannedTensor>(regions.length);
  const spans: Span[] = [];
  let cursor = 0;
  for (const [f, mine] of byFile(regions, files)) {
    let span: Span | undefined;
    for (const i of mine) {
      const r = regions[i]!;
      const extends_ = span && r.fileOffset >= span.fileOffset + span.size && r.fileOffset - (span.fileOffset + span.size) <= gap;
      if (r.byteLength > 0 && !extends_) {
        if (span) cursor = span.slabOffset + span.size;
        span = { file: f, fileOffset: r.fileOffset, size: 0, slabOffset: alignUp(cursor) };
        spans.push(span);
      }
      if (span && r.byteLength > 0) span.size = Math.max(span.size, r.fileOffset + r.byteLength - span.fileOffset);
      // An empty tensor owns no bytes: it points at the slab's current end, inside no span.
      const byteOffset = r.byteLength > 0 ? span!.slabOffset + (r.fileOffset - span!.fileOffset) : alignUp(span ? span.slabOffset + span.size : cursor);
      const t = r as PlannedTensor;
      t.byteOffset = byteOffset;
      tensors[i] = t;
    }
    if (span) cursor = span.slabOffset + span.size;
  }
  return { tensors, spans, cursor };
}

/** The end of the slab: past every tensor and span. */
function slabEnd(tensors: readonly PlannedTensor[], cursor: number): number {
  return tensors.reduce((m, t) => Math.max(m, t.byteOffset + t.byteLength), cursor);
}

/** Moves each tensor its span leaves misaligned for its element size to a place of its own past `end`; returns the new end. */
function alignElements(tensors: PlannedTensor[], end: number): number {
  for (const t of tensors) {
    const bits = dtypeBits(t.dtype);
    const elem = bits % 8 === 0 ? bits / 8 : 1;
    if (t.byteLength === 0 || t.byteOffset % elem === 0) continue;
    t.copyFrom = t.byteOffset;
    t.byteOffset = alignUp(end);
    end = t.byteOffset + t.byteLength;
  }
  return end;
}

/** Per file, the indexes of its regions in file order (sorted only where they are not already). */
function byFile(regions: Region[], files: number): [number, number[]][] {
  const out: number[][] = Array.from({ length: files }, () => []);
  for (let i = 0; i < regions.length; i++) out[regions[i]!.file]!.push(i);
  return out.map((mine, f) => {
    let sorted = true;
    for (let k = 1; k < mine.length && sorted; k++) sorted = regions[mine[k - 1]!]!.fileOffset <= regions[mine[k]!]!.fileOffset;
    if (!sorted) mine.sort((a, b) => regions[a]!.fileOffset - regions[b]!.fileOffset || a - b);
    return [f, mine] as [number, number[]];
  });
}

function alignUp(n: number): number {
  return Math.ceil(n / SLAB_ALIGNMENT) * SLAB_ALIGNMENT;
}

function select(cp: Checkpoint, filter: TensorFilter | undefined): FileTensor[] {
  const all = cp.files.flatMap((f) => f.tensors);
  if (filter === undefined) return all;
  if (typeof filter === 'function') return all.filter((t) => filter(t.name));
  if (Array.isArray(filter)) {
    const names = filter as readonly string[];
    for (const n of names)
      if (!cp.tensors.has(n)) throw formatError('ERR_PENSTOCK_TENSOR_NOT_FOUND', `the checkpoint has no tensor named ${JSON.stringify(n)}`, { tensor: n });
    const wanted = new Set(names);
    return all.filter((t) => wanted.has(t.name));
  }
  const prefix = typeof filter === 'object' && filter !== null ? (filter as { prefix: unknown }).prefix : undefined;
  if (typeof prefix !== 'string') throw usage('ERR_PENSTOCK_INVALID_ARGUMENT', `a filter is a list of names, { prefix } or a function of the name, got ${describe(filter)}`);
  return all.filter((t) => t.name.startsWith(prefix));
}

type Region = Omit<PlannedTensor, 'byteOffset'>;

function region(t: FileTensor, rows: RowShard | undefined): Region {
  const base: Region = { name: t.name, dtype: t.dtype, shape: t.shape, strides: t.strides, file: t.file, fileOffset: t.fileOffset, byteLength: t.byteLength };
  // Only C-ordered 2-D tensors have contiguous rows.
  if (!rows || t.shape.length !== 2 || t.strides[1] !== 1) return base;
  const [R, C] = t.shape as [number, number];
  const rowBits = C * dtypeBits(t.dtype);
  if (rowBits % 8 !== 0)
    throw formatError('ERR_PENSTOCK_TENSOR_ROW_SPLIT', `rows of ${JSON.stringify(t.name)} (${C} × ${t.dtype}) do not start on byte boundaries`, { tensor: t.name });
  const rowBytes = rowBits / 8;
  const begin = Math.floor((rows.index * R) / rows.count);
  const end = Math.floor(((rows.index + 1) * R) / rows.count);
  return { ...base, shape: [end - begin, C], fileOffset: t.fileOffset + begin * rowBytes, byteLength: (end - begin) * rowBytes, rows: { begin, end, of: R } };
}
