/**
 * The safetensors header: an 8-byte little-endian length, that many bytes of UTF-8 JSON (padded
 * with spaces), then the data section. Everything is checked here, before any data moves:
 * lengths against the file, the JSON (duplicate names included), every dtype, shape and offset
 * pair, and that no two tensors share bytes. Tensors may come in any order, with gaps between
 * them, and the data section may start at any byte.
 */
import { isDtype, type Dtype } from './dtypes.js';
import { formatError } from './errors.js';
import { exactIndex, isJsonObject, parseStrictJson, StrictJsonError, type JsonValue } from './strict-json.js';
import { addEntry, checkMetadata, elementsOf, entryColumns, inOffsetOrder, type EntryColumns } from './safetensors-entries.js';
import { scannedEntries } from './safetensors-scan.js';

/** Header lengths beyond this are refused as corrupt (the reference implementation's limit too). */
export const MAX_HEADER_BYTES = 100_000_000;

/** One tensor as the header describes it; offsets are relative to the data section. */
export interface TensorEntry {
  /** The tensor's name (the header's key). */
  name: string;
  /** Its safetensors dtype name, e.g. `BF16`. */
  dtype: Dtype;
  /** Dimensions in elements; `[]` for a scalar. */
  shape: number[];
  /** Elements (the product of the shape; 1 for a scalar). */
  elements: number;
  /** First byte, relative to the start of the data section. */
  begin: number;
  /** End (exclusive), relative to the start of the data section. */
  end: number;
}

/** A parsed header. */
export interface SafetensorsHeader {
  /** The JSON's length in bytes (the file's first 8 bytes). */
  headerLength: number;
  /** File offset of the data section: 8 + headerLength. */
  dataStart: number;
  /** Bytes from the data section's start to the end of the file. */
  dataLength: number;
  /** Tensors sorted by their offsets. */
  tensors: TensorEntry[];
  /** `__metadata__`, when present. */
  metadata?: Record<string, string>;
}

/**
 * The header length from the file's first 8 bytes, checked against the file size.
 * @param prefix the first bytes of the file (at least 8 where the file has them)
 */
export function headerLengthOf(prefix: Uint8Array, fileSize: number, path?: string): number {
  if (fileSize < 8 || prefix.length < 8)
    throw formatError('ERR_PENSTOCK_TENSOR_FILE_TOO_SMALL', `${fileSize} bytes is too short for a safetensors file (the header length alone is 8)`, { path });
  const n = new DataView(prefix.buffer, prefix.byteOffset, 8).getBigUint64(0, true);
  if (n > BigInt(MAX_HEADER_BYTES))
    throw formatError('ERR_PENSTOCK_TENSOR_HEADER_TOO_LARGE', `the header length ${n} is beyond the ${MAX_HEADER_BYTES}-byte limit`, { path });
  const len = Number(n);
  if (len > fileSize - 8)
    throw formatError('ERR_PENSTOCK_TENSOR_HEADER_PAST_FILE', `the header length ${len} runs past the end of the file (${fileSize} bytes)`, { path });
  if (len < 2) throw formatError('ERR_PENSTOCK_TENSOR_HEADER_TOO_SHORT', `a header length of ${len} cannot hold a JSON object`, { path });
  return len;
}

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** Parses and checks the header JSON (`json`: the `headerLength` bytes after the first 8). */
export function parseSafetensorsHeader(json: Uint8Array, fileSize: number, path?: string): SafetensorsHeader {
  return headerOf(readSafetensorsEntries(json, fileSize, path));
}

/** @internal The strict reader alone, without the addon's scan (which is tested against it). */
export function parseSafetensorsHeaderStrictly(json: Uint8Array, fileSize: number, path?: string): SafetensorsHeader {
  return headerOf(readSafetensorsEntries(json, fileSize, path, false));
}

/** @internal A checked header with its tensors as columns, in the order of their offsets. */
export interface HeaderEntries extends EntryColumns {
  /** The JSON's length in bytes. */
  headerLength: number;
  /** File offset of the data section. */
  dataStart: number;
  /** Bytes of the data section. */
  dataLength: number;
}

/**
 * @internal As {@link parseSafetensorsHeader}, with the tensors as columns: a caller that makes
 * objects of its own from them (describeCheckpoint) makes one per tensor instead of two.
 */
export function readSafetensorsEntries(json: Uint8Array, fileSize: number, path?: string, scan = true): HeaderEntries {
  const headerLength = json.length;
  const dataStart = 8 + headerLength;
  const dataLength = fileSize - dataStart;
  if (dataLength < 0)
    throw formatError('ERR_PENSTOCK_TENSOR_HEADER_PAST_FILE', `the header length ${headerLength} runs past the end of the file (${fileSize} bytes)`, { path });
  // The plain form is read natively; anything else, or anything wrong, is read again strictly,
  // and every error comes from there, so both readers refuse alike.
  const c = (scan ? scannedEntries(json, dataLength, path) : undefined) ?? parseStrictly(json, dataLength, path);
  inOffsetOrder(c, path);
  return Object.assign(c, { headerLength, dataStart, dataLength });
}

/** The public form of a header: an object per tensor. */
function headerOf(h: HeaderEntries): SafetensorsHeader {
  const tensors: TensorEntry[] = [];
  for (let k = 0; k < h.names.length; k++)
    tensors.push({ name: h.names[k]!, dtype: h.dtypes[k]!, shape: h.shapes[k]!, elements: h.elements[k]!, begin: h.begins[k]!, end: h.ends[k]! });
  const header: SafetensorsHeader = { headerLength: h.headerLength, dataStart: h.dataStart, dataLength: h.dataLength, tensors };
  if (h.metadata) header.metadata = h.metadata;
  return header;
}

/** The strict reader: any valid JSON, every error worded. */
function parseStrictly(json: Uint8Array, dataLength: number, path: string | undefined): EntryColumns {
  let text: string;
  try {
    text = utf8.decode(json);
  } catch {
    throw formatError('ERR_PENSTOCK_TENSOR_HEADER_NOT_UTF8', 'the header is not valid UTF-8', { path });
  }
  const body = text.replace(/ +$/, '');
  if (/\0[\0 ]*$/.test(text))
    throw formatError('ERR_PENSTOCK_TENSOR_HEADER_BAD_PADDING', 'the header JSON is padded with bytes other than spaces', { path });
  let root: JsonValue;
  try {
    root = parseStrictJson(body);
  } catch (err) {
    const e = err as StrictJsonError;
    if (e.kind === 'duplicate' && e.depth === 1)
      throw formatError('ERR_PENSTOCK_TENSOR_DUPLICATE_NAME', `the tensor name ${JSON.stringify(e.key)} appears twice in the header`, { path, tensor: e.key! });
    if (e.kind === 'depth') throw formatError('ERR_PENSTOCK_TENSOR_HEADER_TOO_DEEP', `the header JSON ${e.message}`, { path });
    throw formatError('ERR_PENSTOCK_TENSOR_HEADER_NOT_JSON', `the header is not valid JSON (${e.message})`, { path });
  }
  if (!isJsonObject(root) || !body.startsWith('{'))
    throw formatError('ERR_PENSTOCK_TENSOR_HEADER_NOT_OBJECT', 'the header JSON is not an object of tensor names', { path });

  const c = entryColumns();
  for (const name of Object.keys(root)) {
    const entry = root[name]!;
    if (name === '__metadata__') {
      c.metadata = checkMetadata(entry, path);
      continue;
    }
    addStrictEntry(c, name, entry, dataLength, path);
  }
  return c;
}

/** An entry as the strict reader reads it: its form first, then what it says ({@link addEntry}). */
function addStrictEntry(c: EntryColumns, name: string, v: JsonValue, dataLength: number, path: string | undefined): void {
  const where = { path, tensor: name };
  const q = JSON.stringify(name);
  if (name.length === 0) throw formatError('ERR_PENSTOCK_TENSOR_EMPTY_NAME', 'a tensor has an empty name', where);
  if (!isJsonObject(v)) throw formatError('ERR_PENSTOCK_TENSOR_ENTRY_NOT_OBJECT', `the entry of tensor ${q} is not an object`, where);
  for (const field of ['dtype', 'shape', 'data_offsets'])
    if (!(field in v)) throw formatError('ERR_PENSTOCK_TENSOR_MISSING_FIELD', `tensor ${q} has no ${field}`, where);
  const dtype = v.dtype;
  if (!isDtype(dtype)) throw formatError('ERR_PENSTOCK_TENSOR_UNKNOWN_DTYPE', `tensor ${q} has the unknown dtype ${JSON.stringify(dtype)}`, where);
  const rawShape = v.shape;
  if (!Array.isArray(rawShape)) throw formatError('ERR_PENSTOCK_TENSOR_BAD_SHAPE', `the shape of tensor ${q} is not an array`, where);
  const shape: number[] = [];
  for (const d of rawShape) {
    const x = exactIndex(d);
    if (x === undefined) throw formatError('ERR_PENSTOCK_TENSOR_BAD_SHAPE', `the shape of tensor ${q} has a dimension that is not a non-negative integer`, where);
    shape.push(x);
  }
  elementsOf(name, shape, path);
  const offs = v.data_offsets;
  if (!Array.isArray(offs) || offs.length !== 2) throw formatError('ERR_PENSTOCK_TENSOR_BAD_OFFSETS', `data_offsets of tensor ${q} is not a pair`, where);
  const begin = exactIndex(offs[0]);
  const end = exactIndex(offs[1]);
  if (begin === undefined || end === undefined)
    throw formatError('ERR_PENSTOCK_TENSOR_BAD_OFFSETS', `data_offsets of tensor ${q} are not non-negative integers`, where);
  addEntry(c, name, dtype, shape, begin, end, dataLength, path);
}
