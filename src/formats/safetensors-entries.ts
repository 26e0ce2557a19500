/**
 * A safetensors header's tensor entries as both readers (the addon's scan and the strict JSON
 * reader) hand them on: columns, one index per tensor, rather than an object each (a header may
 * hold 15 000 tensors, and the objects a load keeps are made once, from these). And the checks
 * of what an entry says, which both readers apply alike.
 */
import { byteLengthOf, dtypeBits, type Dtype } from './dtypes.js';
import { formatError, type TensorErrorCode } from './errors.js';
import { isJsonObject, type JsonValue } from './strict-json.js';

/** The tensor entries of a header, tensor `k` at index `k` of each column. */
export interface EntryColumns {
  names: string[];
  dtypes: Dtype[];
  shapes: number[][];
  /** Elements of each tensor (the product of its shape). */
  elements: number[];
  /** Offsets relative to the data section. */
  begins: number[];
  ends: number[];
  /** `__metadata__`, when present. */
  metadata?: Record<string, string>;
}

/** Empty columns. */
export function entryColumns(): EntryColumns {
  return { names: [], dtypes: [], shapes: [], elements: [], begins: [], ends: [] };
}

/**
 * Checks what an entry says and adds it to the columns: a non-empty name, a shape whose
 * elements can be addressed, offsets in order and inside the data, and exactly the bytes the
 * dtype and shape need.
 */
export function addEntry(c: EntryColumns, name: string, dtype: Dtype, shape: number[], begin: number, end: number, dataLength: number, path: string | undefined): void {
  // Messages are made only on failure (this runs once per tensor, 15 000 times for some files).
  if (name.length === 0) throw entryError('ERR_PENSTOCK_TENSOR_EMPTY_NAME', 'a tensor has an empty name', name, path);
  const elements = elementsOf(name, shape, path);
  if (end < begin) throw entryError('ERR_PENSTOCK_TENSOR_OFFSETS_OUT_OF_ORDER', `tensor ${JSON.stringify(name)} ends (${end}) before it begins (${begin})`, name, path);
  if (end > dataLength)
    throw entryError('ERR_PENSTOCK_TENSOR_OUTSIDE_DATA', `tensor ${JSON.stringify(name)} [${begin}, ${end}) runs past the data section (${dataLength} bytes)`, name, path);
  const bytes = byteLengthOf(dtype, elements);
  if (bytes === undefined)
    throw entryError('ERR_PENSTOCK_TENSOR_SUB_BYTE_PACKING', `tensor ${JSON.stringify(name)}: ${elements} elements of ${dtype} (${dtypeBits(dtype)} bits each) do not fill whole bytes`, name, path);
  if (end - begin !== bytes)
    throw entryError('ERR_PENSTOCK_TENSOR_SIZE_MISMATCH', `tensor ${JSON.stringify(name)} holds ${end - begin} bytes, but ${dtype} × [${shape.join(', ')}] needs ${bytes}`, name, path);
  c.names.push(name);
  c.dtypes.push(dtype);
  c.shapes.push(shape);
  c.elements.push(elements);
  c.begins.push(begin);
  c.ends.push(end);
}

/** Elements of a shape; refused where they could not be addressed. */
export function elementsOf(name: string, shape: readonly number[], path: string | undefined): number {
  // A dimension of 0 anywhere leaves no elements, whatever the others (`[2^40, 2^40, 0]`).
  let elements = shape.includes(0) ? 0 : 1;
  for (let i = 0; i < shape.length && elements > 0; i++) {
    elements *= shape[i]!;
    if (!Number.isSafeInteger(elements * 8))
      throw formatError('ERR_PENSTOCK_TENSOR_SHAPE_OVERFLOW', `the shape [${shape.slice(0, i + 1).join(', ')}…] of tensor ${JSON.stringify(name)} has more elements than can be addressed`, { path, tensor: name });
  }
  return elements;
}

/** `__metadata__`: an object of strings. */
export function checkMetadata(v: JsonValue, path: string | undefined): Record<string, string> {
  if (!isJsonObject(v)) throw formatError('ERR_PENSTOCK_TENSOR_BAD_METADATA', '__metadata__ is not an object', { path });
  const out: Record<string, string> = {};
  for (const [k, x] of Object.entries(v)) {
    if (typeof x !== 'string') throw formatError('ERR_PENSTOCK_TENSOR_BAD_METADATA', `__metadata__.${k} is not a string`, { path });
    out[k] = x;
  }
  return out;
}

/**
 * Puts the columns in the order of the tensors' offsets (the header's order among equals) and
 * refuses two tensors that share bytes. Headers whose entries are in that order already (most)
 * are only checked.
 */
export function inOffsetOrder(c: EntryColumns, path: string | undefined): void {
  const { begins, ends } = c;
  const n = begins.length;
  let sorted = true;
  for (let k = 1; k < n && sorted; k++) sorted = begins[k - 1]! < begins[k]! || (begins[k - 1] === begins[k] && ends[k - 1]! <= ends[k]!);
  if (!sorted) {
    const order = Array.from({ length: n }, (_, k) => k).sort((a, b) => begins[a]! - begins[b]! || ends[a]! - ends[b]! || a - b);
    const pick = <T>(xs: T[]): T[] => order.map((k) => xs[k]!);
    c.names = pick(c.names);
    c.dtypes = pick(c.dtypes);
    c.shapes = pick(c.shapes);
    c.elements = pick(c.elements);
    c.begins = pick(begins);
    c.ends = pick(ends);
  }
  checkOverlaps(c, path);
}

/** Refuses two tensors (in offset order) that share bytes; an empty tensor owns none. */
function checkOverlaps(c: EntryColumns, path: string | undefined): void {
  const { names, begins, ends } = c;
  let prev = -1;
  for (let k = 0; k < begins.length; k++) {
    if (ends[k] === begins[k]) continue;
    if (prev >= 0 && begins[k]! < ends[prev]!)
      throw formatError('ERR_PENSTOCK_TENSOR_OVERLAP', `tensors ${JSON.stringify(names[prev])} [${begins[prev]}, ${ends[prev]}) and ${JSON.stringify(names[k])} [${begins[k]}, ${ends[k]}) share bytes`, { path, tensor: names[k]! });
    prev = k;
  }
}

function entryError(code: TensorErrorCode, message: string, name: string, path: string | undefined): Error {
  return formatError(code, message, { path, tensor: name });
}
