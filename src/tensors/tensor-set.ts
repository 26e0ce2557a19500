/**
 * A loaded tensor set: one slab (GPU or host memory) holding every tensor, per-tensor views of
 * it, the checkpoint's metadata and the route record of the load.
 */
import { DeviceBuffer } from '../memory/device-buffer.js';
import { PinnedBuffer } from '../memory/pinned-buffer.js';
import type { Reason } from '../vocabulary/reasons.js';
import type { Route } from '../engine/stats.js';
import type { RemoteRoute } from '../sources/remote/stats.js';
import type { Dtype } from '../formats/dtypes.js';
import { formatError } from '../formats/errors.js';
import type { PlannedTensor } from './load-plan.js';

/**
 * Where a tensor lies in the slab: exactly the fields another process needs to map it (the
 * records of a hand-off manifest, `exportTensorSet`).
 */
export interface TensorLayoutEntry {
  /** The tensor's name. */
  name: string;
  /** Its safetensors dtype name, e.g. `BF16`. */
  dtype: Dtype;
  /** Dimensions in elements as loaded (the shard's rows for a row-sharded tensor); `[]` for a scalar. */
  shape: number[];
  /** Element strides (C order unless the file stored Fortran order). */
  strides: number[];
  /** Byte offset of the tensor in the slab. */
  byteOffset: number;
  /** Bytes the tensor spans in the slab. */
  byteLength: number;
}

/** One tensor of a set: its place in the slab, where it came from, and its memory. */
export interface TensorView extends TensorLayoutEntry {
  /** The file it came from, and where in it. */
  path: string;
  /** Absolute byte offset of the loaded bytes in that file. */
  fileOffset: number;
  /** The rows taken of a row-sharded 2-D tensor, and the full row count. */
  rows?: { begin: number; end: number; of: number };
  /** The tensor's memory: a view of the slab (GPU: a `DeviceBuffer`; host: a `Uint8Array`). */
  data: DeviceBuffer | Uint8Array;
  /**
   * Host sets only: the same bytes as a typed array of the tensor's element type, where
   * JavaScript has one (see {@link TensorValues}); absent on the GPU and for dtypes without one.
   * Elements are in memory order (`strides` tell the layout). No copy: it shares the slab.
   */
  values?: TensorValues;
}

/**
 * The typed array of a host tensor's `values`, by dtype: `F32` Float32Array, `F64` Float64Array,
 * `I8` Int8Array, `U8` and `BOOL` Uint8Array (0 or 1), `I16` Int16Array, `U16` Uint16Array, `I32`
 * Int32Array, `U32` Uint32Array, `I64` BigInt64Array, `U64` BigUint64Array, `F16` Float16Array
 * where the runtime has it (Node 24 and later; absent before). `BF16`, the `F8_*`, `F6_*` and `F4`
 * types and `C64` have no JavaScript array: their `values` is absent, and `data` holds the bytes.
 */
export type TensorValues = Float32Array | Float64Array | Int8Array | Uint8Array | Int16Array | Uint16Array | Int32Array | Uint32Array | BigInt64Array | BigUint64Array;

type TypedArrayClass = new (buffer: ArrayBufferLike, byteOffset: number, length: number) => TensorValues;

const VALUE_ARRAYS: Partial<Record<Dtype, TypedArrayClass>> = {
  F32: Float32Array, F64: Float64Array, I8: Int8Array, U8: Uint8Array, BOOL: Uint8Array, I16: Int16Array, U16: Uint16Array,
  I32: Int32Array, U32: Uint32Array, I64: BigInt64Array, U64: BigUint64Array,
  // Float16Array came with Node 24; the lib types of this package predate it.
  ...(typeof (globalThis as { Float16Array?: unknown }).Float16Array === 'function' ? { F16: (globalThis as unknown as { Float16Array: TypedArrayClass }).Float16Array } : {}),
};

/** The typed array over a tensor's bytes in host memory, or undefined (no such array; misaligned bytes). */
export function valuesOf(dtype: Dtype, bytes: Uint8Array): TensorValues | undefined {
  const Kind = VALUE_ARRAYS[dtype];
  if (!Kind) return undefined;
  const size = (Kind as unknown as { BYTES_PER_ELEMENT: number }).BYTES_PER_ELEMENT;
  if (bytes.byteOffset % size !== 0 || bytes.byteLength % size !== 0) return undefined;
  return new Kind(bytes.buffer, bytes.byteOffset, bytes.byteLength / size);
}

/** @internal Every planned tensor's view of the slab, in plan order and by name. */
export interface TensorViews {
  tensors: TensorView[];
  byName: Map<string, TensorView>;
}

/**
 * @internal The views of planned tensors in a slab. A load builds them while its reads run: for a
 * checkpoint of many small tensors they are a large part of the work that is not reading.
 */
export function viewTensors(slab: DeviceBuffer | Uint8Array, planned: readonly PlannedTensor[], paths: readonly string[]): TensorViews {
  const tensors = new Array<TensorView>(planned.length);
  const byName = new Map<string, TensorView>();
  const device = slab instanceof DeviceBuffer ? slab : undefined;
  const host = device ? undefined : (slab as Uint8Array);
  for (let i = 0; i < planned.length; i++) {
    const t = planned[i]!;
    const data = device ? device.subarray(t.byteOffset, t.byteOffset + t.byteLength) : new Uint8Array(host!.buffer, host!.byteOffset + t.byteOffset, t.byteLength);
    const v: TensorView = {
      name: t.name, dtype: t.dtype, shape: t.shape, strides: t.strides, byteOffset: t.byteOffset, byteLength: t.byteLength,
      path: paths[t.file]!, fileOffset: t.fileOffset, data,
    };
    if (t.rows) v.rows = t.rows;
    if (host) {
      const values = valuesOf(t.dtype, data as Uint8Array);
      if (values) v.values = values;
    }
    byName.set(t.name, v);
    tensors[i] = v;
  }
  return { tensors, byName };
}

/** What one file's reads did. */
export interface FileLoadRecord {
  /** The file's path or URL. */
  path: string;
  /**
   * Spans read: each an engine operation, except that a local file's spans of at most 1 MiB, when
   * it has two or more, are read together in one batch (`readBatch`) and counted one each.
   */
  operations: number;
  /** Tasks over those operations (the engine's unit, `taskSize` each; a batch's preads; for remote sources, HTTP requests). */
  ops: number;
  /** Bytes read from this file (tensor bytes plus coalesced gaps). */
  bytes: number;
  /** Tasks and bytes per route that carried them. */
  routes: Partial<Record<Route | RemoteRoute, { ops: number; bytes: number }>>;
  /**
   * Faster ways its reads did not take, each code once with its sentence: first why its device
   * reads did not go through cuFile (where they did not), then what its reads met (the mapped
   * route refused, kept pages not kept, O_DIRECT refused).
   */
  fallbacks: Reason[];
  /** Whether any read bypassed the page cache (O_DIRECT). */
  direct: boolean;
}

/** Where the slab is. */
export type SlabPlace = { kind: 'device'; device: number } | { kind: 'host'; pinned: boolean };

/**
 * Tensors loaded into one slab. `free()` (or `using`) releases the slab, after which every view
 * is gone. Views are in the order of the checkpoint's files and headers (filters keep that order).
 */
export class TensorSet {
  /** The tensors, in load order. */
  readonly tensors: readonly TensorView[];
  /** Per file: its safetensors `__metadata__` (absent for files without it). */
  readonly metadata: Readonly<Record<string, Record<string, string>>>;
  /** The sharded index's `metadata`, when loaded from an index. */
  readonly indexMetadata?: Record<string, unknown>;
  /** Route record per file. */
  readonly files: readonly FileLoadRecord[];
  /** Bytes read from the files (tensor bytes, plus gaps coalesced into the reads). */
  readonly bytes: number;
  /** Seconds from the start of the load to the last byte in memory. */
  readonly seconds: number;
  /** Where the slab is: a GPU (by ordinal) or host memory (pinned or not). */
  readonly place: SlabPlace;
  #slab: DeviceBuffer | Uint8Array | undefined;
  #pinned: PinnedBuffer | undefined;
  readonly #byName: Map<string, TensorView>;

  /** @internal Built by `loadTensors`. */
  constructor(init: {
    slab: DeviceBuffer | Uint8Array;
    pinned?: PinnedBuffer;
    place: SlabPlace;
    views: TensorViews;
    metadata: Record<string, Record<string, string>>;
    indexMetadata?: Record<string, unknown>;
    files: FileLoadRecord[];
    bytes: number;
    seconds: number;
  }) {
    this.#slab = init.slab;
    this.#pinned = init.pinned;
    this.place = init.place;
    this.metadata = init.metadata;
    if (init.indexMetadata) this.indexMetadata = init.indexMetadata;
    this.files = init.files;
    this.bytes = init.bytes;
    this.seconds = init.seconds;
    this.tensors = init.views.tensors;
    this.#byName = init.views.byName;
  }

  /** The slab every view points into. */
  get slab(): DeviceBuffer | Uint8Array {
    if (!this.#slab) throw formatError('ERR_PENSTOCK_TENSOR_SET_FREED', 'this tensor set was freed');
    return this.#slab;
  }

  /** The pinned allocation under a pinned host slab. */
  get pinnedBuffer(): PinnedBuffer | undefined {
    return this.#pinned;
  }

  /** Whether `free()` has run (the views are then gone). */
  get freed(): boolean {
    return this.#slab === undefined;
  }

  /** Number of tensors. */
  get size(): number {
    return this.tensors.length;
  }

  /** A tensor by name (undefined when the set does not hold it). */
  get(name: string): TensorView | undefined {
    if (!this.#slab) throw formatError('ERR_PENSTOCK_TENSOR_SET_FREED', 'this tensor set was freed');
    return this.#byName.get(name);
  }

  /** Exactly the per-tensor fields a hand-off manifest needs: name, dtype, shape, strides, byte offset and length in the slab. */
  layout(): TensorLayoutEntry[] {
    return this.tensors.map((t) => ({ name: t.name, dtype: t.dtype, shape: [...t.shape], strides: [...t.strides], byteOffset: t.byteOffset, byteLength: t.byteLength }));
  }

  /** Tasks and bytes per route over every file. */
  routeTotals(): Partial<Record<Route | RemoteRoute, { ops: number; bytes: number }>> {
    const out: Partial<Record<Route | RemoteRoute, { ops: number; bytes: number }>> = {};
    for (const f of this.files)
      for (const [r, c] of Object.entries(f.routes) as [Route | RemoteRoute, { ops: number; bytes: number }][]) {
        const t = (out[r] ??= { ops: 0, bytes: 0 });
        t.ops += c.ops;
        t.bytes += c.bytes;
      }
    return out;
  }

  /** Releases the slab (GPU memory freed, pinned memory freed, host memory dropped). Idempotent. */
  free(): void {
    const slab = this.#slab;
    if (!slab) return;
    if (slab instanceof DeviceBuffer) slab.free();
    this.#pinned?.free();
    this.#slab = undefined;
    this.#pinned = undefined;
  }

  /** Frees the slab at the end of a `using` block (as `free()`). */
  [Symbol.dispose](): void {
    this.free();
  }
}
