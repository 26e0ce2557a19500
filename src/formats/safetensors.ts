/**
 * The safetensors header: an 8-byte little-endian length, that many bytes of UTF-8 JSON (padded
 * with spaces), then the data section. Everything is checked here, before any data moves:
 * lengths against the file, the JSON (duplicate names included), every dtype, shape and offset
 * pair, and that no two tensors share bytes. Tensors may come in any order, with gaps between
 * them, and the data section may start at any byte.
 */
import { byteLengthOf, dtypeBits, DTYPES, isDtype, type Dtype } from './dtypes.js';
import { formatError, type TensorErrorCode } from './errors.js';
import { exactIndex, isJsonObject, parseStrictJson, StrictJsonError, type JsonValue } from './strict-json.js';
import { native, type NativeAddon, type NativeHeaderScan } from '../addon/binding.js';

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
  return readHeader(json, fileSize, path, true);
}

/** @internal The strict reader alone, without the addon's scan (which is tested against it). */
export function parseSafetensorsHeaderStrictly(json: Uint8Array, fileSize: number, path?: string): SafetensorsHeader {
  return readHeader(json, fileSize, path, false);
}

function readHeader(json: Uint8Array, fileSize: number, path: string | undefined, scan: boolean): SafetensorsHeader {
  const headerLength = json.length;
  const dataStart = 8 + headerLength;
  const dataLength = fileSize - dataStart;
  if (dataLength < 0)
    throw formatError('ERR_PENSTOCK_TENSOR_HEADER_PAST_FILE', `the header length ${headerLength} runs past the end of the file (${fileSize} bytes)`, { path });
  const header: SafetensorsHeader = { headerLength, dataStart, dataLength, tensors: [] };
  // The plain form is read natively; anything else, or anything wrong, is read again strictly,
  // and every error comes from there, so both readers refuse alike.
  const { tensors, metadata } = (scan ? fromScan(json, dataLength, path) : undefined) ?? parseStrictly(json, dataLength, path);
  sortAndCheckOverlaps(tensors, path);
  header.tensors = tensors;
  if (metadata) header.metadata = metadata;
  return header;
}

interface HeaderBody {
  tensors: TensorEntry[];
  metadata?: Record<string, string>;
}

/** The header as the addon's scan reads it, every tensor checked; undefined where the scan declines or any check fails. */
function fromScan(json: Uint8Array, dataLength: number, path: string | undefined): HeaderBody | undefined {
  const scan = headerScanner()?.(json);
  if (!scan) return undefined;
  try {
    const names = namesOf(scan.names);
    // The dtype names as the module's own strings: a string made by the addon is not
    // internalized, and every lookup keyed by it (sizes, typed arrays) would take a slow path.
    const dtypes: Dtype[] = [];
    for (const d of scan.dtypes) {
      if (!isDtype(d)) return undefined;
      dtypes.push(DTYPES[DTYPES.indexOf(d)]!);
    }
    if (names.length !== scan.count) return undefined;
    const body: HeaderBody = { tensors: scannedEntries(scan, names, dtypes, dataLength, path) };
    if (scan.metadataAt !== undefined) {
      const text = utf8.decode(json.subarray(scan.metadataAt, scan.metadataAt + scan.metadataLength!));
      body.metadata = checkMetadata(parseStrictJson(text), path);
    }
    return body;
  } catch {
    return undefined;
  }
}

/** The names from the scan's strings of them (a pass of its own, as {@link scannedEntries}). */
function namesOf(chunks: readonly string[]): string[] {
  const names: string[] = [];
  for (const chunk of chunks) for (const name of chunk.split('\n')) names.push(name);
  return names;
}

/**
 * Every scanned tensor, checked. Its own function, returning as its loop ends: V8 optimises a
 * long loop while it runs, and code after the loop that had not yet run would then deoptimise it
 * on every load (a function called once per load never stays optimised).
 */
function scannedEntries(scan: NativeHeaderScan, names: readonly string[], dtypes: readonly Dtype[], dataLength: number, path: string | undefined): TensorEntry[] {
  const { count, dtype, rank, dims, offsets } = scan;
  const tensors: TensorEntry[] = [];
  let at = 0;
  for (let k = 0; k < count; k++) {
    const shape = shapeAt(dims, at, rank[k]!);
    at += rank[k]!;
    tensors.push(checkTensor(names[k]!, dtypes[dtype[k]!]!, shape, small(offsets[2 * k]!), small(offsets[2 * k + 1]!), dataLength, path));
  }
  return tensors;
}

/**
 * A number read from a Float64Array, as a small integer where it is one. Read there, even an
 * integer is a heap number until the code is optimised, and the objects and arrays that hold such
 * numbers keep them as doubles: every later use then allocates, and planning a load of 15 000
 * tensors took twice as long in a fresh process. A bitwise operation gives V8's small integer.
 */
function small(v: number): number {
  return v < 0x80000000 ? v | 0 : v;
}

/** A shape from the scan's dimensions, as an array of exactly its length (most have one to three). */
function shapeAt(dims: Float64Array, at: number, rank: number): number[] {
  switch (rank) {
    case 0:
      return [];
    case 1:
      return [small(dims[at]!)];
    case 2:
      return [small(dims[at]!), small(dims[at + 1]!)];
    case 3:
      return [small(dims[at]!), small(dims[at + 1]!), small(dims[at + 2]!)];
    default:
      return Array.from(dims.subarray(at, at + rank), small);
  }
}

let scanner: NativeAddon['scanSafetensorsHeader'] | null | undefined;

/** The addon's header scan, or null where the addon does not load (headers are then read in JavaScript). */
function headerScanner(): NativeAddon['scanSafetensorsHeader'] | null {
  if (scanner === undefined) {
    try {
      scanner = native().scanSafetensorsHeader;
    } catch {
      scanner = null;
    }
  }
  return scanner;
}

/** The strict reader: any valid JSON, every error worded. */
function parseStrictly(json: Uint8Array, dataLength: number, path: string | undefined): HeaderBody {
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

  const out: HeaderBody = { tensors: [] };
  for (const name of Object.keys(root)) {
    const entry = root[name]!;
    if (name === '__metadata__') {
      out.metadata = checkMetadata(entry, path);
      continue;
    }
    out.tensors.push(checkEntry(name, entry, dataLength, path));
  }
  return out;
}

/** Sorts tensors by their offsets (in place) and refuses two that share bytes. */
function sortAndCheckOverlaps(tensors: TensorEntry[], path: string | undefined): void {
  tensors.sort((a, b) => a.begin - b.begin || a.end - b.end);
  let prev: TensorEntry | undefined;
  for (const t of tensors) {
    if (t.end === t.begin) continue; // an empty tensor owns no bytes
    if (prev && t.begin < prev.end)
      throw formatError('ERR_PENSTOCK_TENSOR_OVERLAP', `tensors ${JSON.stringify(prev.name)} [${prev.begin}, ${prev.end}) and ${JSON.stringify(t.name)} [${t.begin}, ${t.end}) share bytes`, { path, tensor: t.name });
    prev = t;
  }
}

function checkMetadata(v: JsonValue, path?: string): Record<string, string> {
  if (!isJsonObject(v)) throw formatError('ERR_PENSTOCK_TENSOR_BAD_METADATA', '__metadata__ is not an object', { path });
  const out: Record<string, string> = {};
  for (const [k, x] of Object.entries(v)) {
    if (typeof x !== 'string') throw formatError('ERR_PENSTOCK_TENSOR_BAD_METADATA', `__metadata__.${k} is not a string`, { path });
    out[k] = x;
  }
  return out;
}

/** An entry as the strict reader reads it: its form first, then what it says ({@link checkTensor}). */
function checkEntry(name: string, v: JsonValue, dataLength: number, path?: string): TensorEntry {
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
  return checkTensor(name, dtype, shape, begin, end, dataLength, path);
}

/**
 * What an entry says, checked: a non-empty name, a shape whose elements can be addressed,
 * offsets in order and inside the data, and exactly the bytes the dtype and shape need.
 */
function checkTensor(name: string, dtype: Dtype, shape: number[], begin: number, end: number, dataLength: number, path?: string): TensorEntry {
  const fail = (code: TensorErrorCode, message: (q: string) => string) => formatError(code, message(JSON.stringify(name)), { path, tensor: name });
  if (name.length === 0) throw fail('ERR_PENSTOCK_TENSOR_EMPTY_NAME', () => 'a tensor has an empty name');
  const elements = elementsOf(name, shape, path);
  if (end < begin) throw fail('ERR_PENSTOCK_TENSOR_OFFSETS_OUT_OF_ORDER', (q) => `tensor ${q} ends (${end}) before it begins (${begin})`);
  if (end > dataLength) throw fail('ERR_PENSTOCK_TENSOR_OUTSIDE_DATA', (q) => `tensor ${q} [${begin}, ${end}) runs past the data section (${dataLength} bytes)`);
  const bytes = byteLengthOf(dtype, elements);
  if (bytes === undefined)
    throw fail('ERR_PENSTOCK_TENSOR_SUB_BYTE_PACKING', (q) => `tensor ${q}: ${elements} elements of ${dtype} (${dtypeBits(dtype)} bits each) do not fill whole bytes`);
  if (end - begin !== bytes) throw fail('ERR_PENSTOCK_TENSOR_SIZE_MISMATCH', (q) => `tensor ${q} holds ${end - begin} bytes, but ${dtype} × [${shape.join(', ')}] needs ${bytes}`);
  return { name, dtype, shape, elements, begin, end };
}

/** Elements of a shape; refused where they could not be addressed. */
function elementsOf(name: string, shape: readonly number[], path?: string): number {
  // A dimension of 0 anywhere leaves no elements, whatever the others (`[2^40, 2^40, 0]`).
  let elements = shape.includes(0) ? 0 : 1;
  for (let i = 0; i < shape.length && elements > 0; i++) {
    elements *= shape[i]!;
    if (!Number.isSafeInteger(elements * 8))
      throw formatError('ERR_PENSTOCK_TENSOR_SHAPE_OVERFLOW', `the shape [${shape.slice(0, i + 1).join(', ')}…] of tensor ${JSON.stringify(name)} has more elements than can be addressed`, { path, tensor: name });
  }
  return elements;
}
