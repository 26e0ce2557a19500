/**
 * Tensor sets over CUDA IPC: a manifest (plain JSON) naming every tensor of a slab of GPU memory
 * — dtype, shape, strides, byte offset — beside the slab's IPC handle, so another process
 * (PyTorch, CuPy, Node) rebuilds each tensor as a view of the same memory, without copies.
 */
import { DeviceBuffer } from '../memory/device-buffer.js';
import { usage } from '../vocabulary/errors.js';
import { exportDeviceBuffer, importDeviceBuffer, type IpcExport, type IpcImportOptions } from './handles.js';
import { parseIpcHandle, type IpcHandle } from './format.js';
import { contiguousStrides, dtypeBits, isDtype } from '../formats/dtypes.js';
import { TensorSet, type TensorLayoutEntry } from '../tensors/tensor-set.js';
import { describe } from '../vocabulary/validate.js';
import { checkOptionKeys } from '../settings/option-keys.js';

/** The `type` every tensor manifest carries. */
export const TENSOR_MANIFEST_TYPE = 'penstock.tensor-manifest';
/** The manifest format version this release writes and reads. */
export const TENSOR_MANIFEST_VERSION = 1;

/**
 * A tensor as the manifest states it: the fields of a loaded set's {@link TensorSet.layout},
 * with any dtype name. The safetensors dtypes (`DTYPES` of `penstock/formats`) are checked against
 * shape, strides and byte length; other names pass through with the byte length given.
 */
export interface ManifestTensor extends Omit<TensorLayoutEntry, 'dtype'> {
  /** A safetensors dtype name: `BF16`, `F32`, `I64`, … (upper case, digits and `_`). */
  dtype: string;
}

/**
 * One tensor of a slab as a caller describes it to {@link buildTensorManifest}: a
 * {@link ManifestTensor} whose strides (default C order) and byte length (default from dtype and
 * shape; required for dtypes outside the safetensors dtypes) may be left out.
 */
export interface TensorRecord extends Omit<ManifestTensor, 'shape' | 'strides' | 'byteLength'> {
  /** Dimensions in elements; `[]` for a scalar. */
  shape: readonly number[];
  /** In elements; default C order. Only whole-byte dtypes may have other strides. */
  strides?: readonly number[];
  /** Bytes the tensor spans; required for dtypes that are not safetensors dtypes. */
  byteLength?: number;
}

/** The hand-off of a whole tensor set: the slab's IPC handle and its tensors. */
export interface TensorManifest {
  /** Always `penstock.tensor-manifest`: marks the object as a tensor manifest. */
  type: typeof TENSOR_MANIFEST_TYPE;
  /** The manifest format version (1); other versions are refused. */
  version: typeof TENSOR_MANIFEST_VERSION;
  /** The slab, exported; tensor offsets are relative to this view (not to the allocation). */
  slab: IpcHandle;
  /** Every tensor of the slab, in the order given, each field filled in. */
  tensors: ManifestTensor[];
  /** Free-form string metadata (a checkpoint's `__metadata__`, say). */
  metadata?: Record<string, string>;
}

function bad(message: string): never {
  throw usage('ERR_PENSTOCK_IPC_BAD_MANIFEST', message);
}

function dims(value: unknown, what: string): number[] {
  if (!Array.isArray(value) || !value.every((d) => typeof d === 'number' && Number.isSafeInteger(d) && d >= 0))
    bad(`${what} must be an array of non-negative integers, got ${describe(value)}`);
  return [...(value as number[])];
}

/** Validates one record against a slab of `slabSize` bytes; returns it with every field filled. */
function checkTensor(value: unknown, slabSize: number, index: number): ManifestTensor {
  if (!value || typeof value !== 'object') bad(`Tensor ${index} must be an object, got ${describe(value)}`);
  const r = value as Record<string, unknown>;
  if (typeof r.name !== 'string' || r.name.length === 0) bad(`Tensor ${index} needs a non-empty string name`);
  const what = `Tensor "${r.name}"`;
  if (typeof r.dtype !== 'string' || !/^[A-Z0-9_]+$/.test(r.dtype)) bad(`${what}: dtype must be a safetensors dtype name, got ${describe(r.dtype)}`);
  const shape = dims(r.shape, `${what}: shape`);
  const contiguous = contiguousStrides(shape);
  const strides = r.strides === undefined ? contiguous : dims(r.strides, `${what}: strides`);
  if (strides.length !== shape.length) bad(`${what}: ${strides.length} strides for ${shape.length} dimensions`);
  const byteOffset = r.byteOffset;
  if (typeof byteOffset !== 'number' || !Number.isSafeInteger(byteOffset) || byteOffset < 0)
    bad(`${what}: byteOffset must be a non-negative integer, got ${describe(byteOffset)}`);
  if (r.byteLength !== undefined && !(typeof r.byteLength === 'number' && Number.isSafeInteger(r.byteLength) && r.byteLength >= 0))
    bad(`${what}: byteLength must be a non-negative integer, got ${describe(r.byteLength)}`);
  const numel = shape.reduce((a, d) => a * d, 1);
  const bits = isDtype(r.dtype) ? dtypeBits(r.dtype) : undefined;
  let byteLength: number;
  if (bits === undefined) {
    if (r.byteLength === undefined) bad(`${what}: dtype ${r.dtype} is not one penstock knows the size of, so byteLength is required`);
    byteLength = r.byteLength as number;
  } else {
    const isContiguous = numel === 0 || strides.every((s, i) => s === contiguous[i] || shape[i] === 1);
    if (bits % 8 !== 0 && !isContiguous) bad(`${what}: ${r.dtype} packs several elements per byte, so it must be contiguous`);
    // The bytes from the first element to the end of the last one the strides reach.
    const lastElement = numel === 0 ? -1 : shape.reduce((a, d, i) => a + (d - 1) * strides[i]!, 0);
    const spanBits = (lastElement + 1) * bits;
    if (!Number.isSafeInteger(spanBits)) bad(`${what}: strides ${JSON.stringify(strides)} reach past what can be addressed`);
    if (spanBits % 8 !== 0) bad(`${what}: ${numel} elements of ${r.dtype} do not fill whole bytes`);
    const span = spanBits / 8;
    // A strided view may span more bytes than its strides reach (the rest of its rows), never fewer;
    // a contiguous one exactly its elements.
    if (r.byteLength !== undefined && (isContiguous ? r.byteLength !== span : (r.byteLength as number) < span))
      bad(`${what}: byteLength ${describe(r.byteLength)} does not match ${r.dtype}${JSON.stringify(shape)} with strides ${JSON.stringify(strides)} (${span} bytes)`);
    byteLength = (r.byteLength as number | undefined) ?? span;
  }
  if (byteOffset > slabSize || byteLength > slabSize - byteOffset)
    bad(`${what}: bytes [${byteOffset}, ${byteOffset + byteLength}) lie outside the slab of ${slabSize} bytes`);
  return { name: r.name, dtype: r.dtype, shape, strides, byteOffset, byteLength };
}

function checkTensors(values: unknown, slabSize: number): ManifestTensor[] {
  if (!Array.isArray(values)) bad(`tensors must be an array, got ${describe(values)}`);
  const seen = new Set<string>();
  return values.map((v, i) => {
    const t = checkTensor(v, slabSize, i);
    if (seen.has(t.name)) bad(`Tensor "${t.name}" appears twice`);
    seen.add(t.name);
    return t;
  });
}

function checkMetadata(value: unknown): Record<string, string> | undefined {
  if (value === undefined) return undefined;
  if (!value || typeof value !== 'object' || Array.isArray(value) || !Object.values(value).every((v) => typeof v === 'string'))
    bad('metadata must be an object of strings');
  return { ...(value as Record<string, string>) };
}

/** A tensor set exported from this process: its manifest, and the export that keeps it alive. */
export class TensorSetExport {
  /** The manifest to hand to the other process (JSON-safe). */
  readonly manifest: Readonly<TensorManifest>;
  /** The slab's export; releasing it ends the hand-off. */
  readonly export: IpcExport;

  /** @internal */
  constructor(manifest: TensorManifest, exported: IpcExport) {
    this.manifest = manifest;
    this.export = exported;
  }

  /** Releases the slab's export (see {@link IpcExport.release}). */
  release(): void {
    this.export.release();
  }

  /** Releases the export at the end of a `using` block (as `release()`). */
  [Symbol.dispose](): void {
    this.release();
  }

  /** The manifest, for `JSON.stringify(set)`. */
  toJSON(): TensorManifest {
    return this.manifest;
  }
}

/**
 * Exports `slab` and describes `tensors` (records with offsets relative to `slab`) in a manifest
 * another process can open ({@link openTensorManifest}; for PyTorch, `penstock serve` hands sets to
 * its Python client: docs/serve.md).
 */
export function buildTensorManifest(
  slab: DeviceBuffer,
  tensors: readonly TensorRecord[],
  options: { metadata?: Record<string, string> } = {},
): TensorSetExport {
  if (!(slab instanceof DeviceBuffer)) bad('the slab must be a DeviceBuffer');
  const checked = checkTensors(tensors, slab.byteLength);
  const metadata = checkMetadata(options.metadata);
  const exported = exportDeviceBuffer(slab);
  const manifest: TensorManifest = {
    type: TENSOR_MANIFEST_TYPE,
    version: TENSOR_MANIFEST_VERSION,
    slab: exported.toJSON(),
    tensors: checked,
    ...(metadata ? { metadata } : {}),
  };
  return new TensorSetExport(manifest, exported);
}

/** Options of {@link exportTensorSet}. */
export interface ExportTensorSetOptions {
  /**
   * The manifest's string metadata. Default: the files' safetensors `__metadata__`, merged (a
   * key that two files give different values is `ERR_PENSTOCK_IPC_BAD_MANIFEST`: name the
   * metadata here instead). `{}` leaves it out.
   */
  metadata?: Record<string, string>;
}

/** The files' `__metadata__` as one object; a key two files disagree on is an error. */
function mergedMetadata(perFile: Readonly<Record<string, Record<string, string>>>): Record<string, string> {
  const out: Record<string, string> = {};
  const from: Record<string, string> = {};
  for (const [file, metadata] of Object.entries(perFile))
    for (const [key, value] of Object.entries(metadata)) {
      if (key in from && out[key] !== value)
        bad(`The files disagree on metadata "${key}" (${JSON.stringify(out[key])} in ${from[key]}, ${JSON.stringify(value)} in ${file}); pass { metadata } to exportTensorSet`);
      out[key] = value;
      from[key] = file;
    }
  return out;
}

/**
 * Exports a tensor set loaded into GPU memory ({@link loadTensors}) in one call: its slab and
 * every tensor of {@link TensorSet.layout}, with the files' metadata. The export holds the slab's
 * memory, even past `set.free()`, until `release()`; another process opens the manifest with
 * {@link openTensorManifest} (for PyTorch, `penstock serve` hands sets to its Python client:
 * docs/serve.md). A set in host memory is `ERR_PENSTOCK_IPC_NOT_EXPORTABLE`; a freed one `ERR_PENSTOCK_TENSOR_SET_FREED`.
 */
export function exportTensorSet(set: TensorSet, options: ExportTensorSetOptions = {}): TensorSetExport {
  if (!(set instanceof TensorSet))
    throw usage('ERR_PENSTOCK_INVALID_ARGUMENT', `exportTensorSet needs a TensorSet (from loadTensors), got ${describe(set)}`);
  if (options === null || typeof options !== 'object')
    throw usage('ERR_PENSTOCK_INVALID_ARGUMENT', `exportTensorSet options must be an object, got ${describe(options)}`);
  checkOptionKeys('exportTensorSet', options);
  const slab = set.slab;
  if (!(slab instanceof DeviceBuffer))
    throw usage('ERR_PENSTOCK_IPC_NOT_EXPORTABLE', 'This tensor set is in host memory; CUDA IPC hands on GPU memory (load it without `host`)');
  const metadata = checkMetadata(options.metadata) ?? mergedMetadata(set.metadata);
  return buildTensorManifest(slab, set.layout(), Object.keys(metadata).length > 0 ? { metadata } : {});
}

/** Checks a manifest given as an object or its JSON text. */
export function parseTensorManifest(input: unknown): TensorManifest {
  let value = input;
  if (typeof value === 'string') {
    try {
      value = JSON.parse(value);
    } catch (err) {
      bad(`The manifest is not valid JSON: ${(err as Error).message}`);
    }
  }
  if (!value || typeof value !== 'object' || Array.isArray(value)) bad(`A tensor manifest must be an object, got ${describe(value)}`);
  const o = value as Record<string, unknown>;
  if (o.type !== TENSOR_MANIFEST_TYPE) bad(`Not a penstock tensor manifest (type ${describe(o.type)})`);
  if (o.version !== TENSOR_MANIFEST_VERSION) bad(`Tensor manifest version ${describe(o.version)} is not understood by this release`);
  const slab = parseIpcHandle(o.slab);
  const metadata = checkMetadata(o.metadata);
  return {
    type: TENSOR_MANIFEST_TYPE,
    version: TENSOR_MANIFEST_VERSION,
    slab,
    tensors: checkTensors(o.tensors, slab.size),
    ...(metadata ? { metadata } : {}),
  };
}

/** One tensor of an opened set: the manifest's description and a view of its bytes. */
export interface OpenedTensor extends ManifestTensor {
  /** A view of the tensor's bytes in the imported slab (no copy). */
  buffer: DeviceBuffer;
}

/** A tensor set opened from another process's manifest. `close()` unmaps the slab. */
export class ImportedTensorSet {
  /** The whole slab, imported. */
  readonly slab: DeviceBuffer;
  /** The tensors by name, in manifest order. */
  readonly tensors: ReadonlyMap<string, OpenedTensor>;
  /** The manifest's string metadata; `{}` when it had none. */
  readonly metadata: Readonly<Record<string, string>>;

  /** @internal */
  constructor(slab: DeviceBuffer, tensors: Map<string, OpenedTensor>, metadata: Record<string, string>) {
    this.slab = slab;
    this.tensors = tensors;
    this.metadata = metadata;
  }

  /** The tensor called `name`, or undefined. */
  get(name: string): OpenedTensor | undefined {
    return this.tensors.get(name);
  }

  /** Closes the slab's mapping; every tensor's buffer becomes freed. */
  close(): void {
    this.slab.free();
  }

  /** Closes the mapping at the end of a `using` block (as `close()`). */
  [Symbol.dispose](): void {
    this.close();
  }
}

/** Opens a manifest from another process: one mapping of the slab, one view per tensor. */
export function openTensorManifest(input: TensorManifest | string, options: IpcImportOptions = {}): ImportedTensorSet {
  checkOptionKeys('openTensorManifest', options);
  const manifest = parseTensorManifest(input);
  const slab = importDeviceBuffer(manifest.slab, options);
  try {
    const tensors = new Map<string, OpenedTensor>();
    for (const t of manifest.tensors)
      tensors.set(t.name, { ...t, buffer: slab.subarray(t.byteOffset, t.byteOffset + t.byteLength) });
    return new ImportedTensorSet(slab, tensors, manifest.metadata ?? {});
  } catch (err) {
    // The mapping is released now, not when the collector finds it.
    slab.free();
    throw err;
  }
}
