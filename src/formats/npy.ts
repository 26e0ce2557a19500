/**
 * The .npy header (versions 1.0, 2.0 and 3.0): magic, version, header length, then a Python
 * dictionary literal with `descr`, `fortran_order` and `shape`. Little-endian numeric and
 * boolean dtypes are accepted; big-endian data is refused with its own code, so no swapped
 * bytes are ever delivered as if they were native.
 */
import { byteLengthOf, contiguousStrides, type Dtype } from './dtypes.js';
import { formatError } from './errors.js';

/** The magic string that starts every .npy file. */
export const NPY_MAGIC = Uint8Array.from([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59]);

/** Bytes of the fixed part before the dictionary for each version: magic, version, length field. */
export const NPY_PREFIX_BYTES = 12;

/** Dictionary lengths beyond this are refused before they are read (numpy's own default limit). */
export const MAX_NPY_HEADER_BYTES = 10_000;

/** Brackets nested deeper than this are refused (a shape is one tuple; structured dtypes nest a few levels). */
export const MAX_NPY_NESTING = 32;

/** A parsed .npy header. */
export interface NpyHeader {
  /** The .npy format version (1.0, 2.0 or 3.0), by its major number. */
  version: 1 | 2 | 3;
  /** The numpy type string, e.g. `<f4`. */
  descr: string;
  /** The safetensors dtype name `descr` maps to, e.g. `F32` for `<f4`. */
  dtype: Dtype;
  /** Whether the data is stored in Fortran (column-major) order. */
  fortranOrder: boolean;
  /** Dimensions in elements; `[]` for a scalar. */
  shape: number[];
  /** Elements in the array (the product of the shape; 1 for a scalar). */
  elements: number;
  /** Element strides of the data as stored (reversed order for Fortran arrays). */
  strides: number[];
  /** File offset of the data. */
  dataStart: number;
  /** Bytes of the data (elements × the dtype's size). */
  byteLength: number;
}

const KIND_SIZE_TO_DTYPE: Record<string, Dtype> = {
  b1: 'BOOL', i1: 'I8', u1: 'U8', i2: 'I16', u2: 'U16', i4: 'I32', u4: 'U32', i8: 'I64', u8: 'U64',
  f2: 'F16', f4: 'F32', f8: 'F64', c8: 'C64',
};

/**
 * How many bytes the header occupies (prefix plus dictionary), from the file's first 12 bytes.
 * The whole header is then `prefix.length` ≥ that many bytes for {@link parseNpyHeader}.
 */
export function npyHeaderLength(prefix: Uint8Array, fileSize: number, path?: string): number {
  if (prefix.length < 10 || fileSize < 10) throw formatError('ERR_PENSTOCK_NPY_TRUNCATED', 'the file ends inside the .npy header', { path });
  for (let i = 0; i < NPY_MAGIC.length; i++)
    if (prefix[i] !== NPY_MAGIC[i]) throw formatError('ERR_PENSTOCK_NPY_BAD_MAGIC', 'the file does not start with the .npy magic string', { path });
  const major = prefix[6]!;
  const minor = prefix[7]!;
  if (![1, 2, 3].includes(major) || minor !== 0)
    throw formatError('ERR_PENSTOCK_NPY_BAD_VERSION', `.npy format version ${major}.${minor} is not 1.0, 2.0 or 3.0`, { path });
  const dv = new DataView(prefix.buffer, prefix.byteOffset, prefix.length);
  if (major > 1 && prefix.length < 12) throw formatError('ERR_PENSTOCK_NPY_TRUNCATED', 'the file ends inside the .npy header', { path });
  const dictLength = major === 1 ? dv.getUint16(8, true) : dv.getUint32(8, true);
  if (dictLength > MAX_NPY_HEADER_BYTES)
    throw formatError('ERR_PENSTOCK_NPY_HEADER_TOO_LARGE', `the .npy header length ${dictLength} is beyond the ${MAX_NPY_HEADER_BYTES}-byte limit (numpy's own)`, { path });
  const total = (major === 1 ? 10 : 12) + dictLength;
  if (total > fileSize) throw formatError('ERR_PENSTOCK_NPY_TRUNCATED', `the .npy header (${total} bytes) runs past the end of the file (${fileSize} bytes)`, { path });
  return total;
}

/** Parses the header (`bytes`: the first {@link npyHeaderLength} bytes of the file). */
export function parseNpyHeader(bytes: Uint8Array, fileSize: number, path?: string): NpyHeader {
  const total = npyHeaderLength(bytes, fileSize, path);
  if (bytes.length < total) throw formatError('ERR_PENSTOCK_NPY_TRUNCATED', 'the .npy header is incomplete', { path });
  const version = bytes[6] as 1 | 2 | 3;
  const start = version === 1 ? 10 : 12;
  const raw = bytes.subarray(start, total);
  let text: string;
  try {
    text = version === 3 ? new TextDecoder('utf-8', { fatal: true }).decode(raw) : Buffer.from(raw).toString('latin1');
  } catch {
    throw formatError('ERR_PENSTOCK_NPY_BAD_HEADER', 'the version 3.0 header is not valid UTF-8', { path });
  }
  const dict = parseHeaderDict(text, path);
  const descr = dict.get('descr');
  const fortran = dict.get('fortran_order');
  const shapeV = dict.get('shape');
  if (typeof descr !== 'string' || typeof fortran !== 'boolean' || !Array.isArray(shapeV) || dict.size !== 3) {
    if (Array.isArray(descr)) throw formatError('ERR_PENSTOCK_NPY_UNSUPPORTED_DTYPE', 'structured dtypes are not supported', { path });
    throw formatError('ERR_PENSTOCK_NPY_BAD_HEADER', "the header must hold exactly 'descr' (a string), 'fortran_order' (a bool) and 'shape' (a tuple)", { path });
  }
  const m = /^([<>|=])([a-zA-Z])(\d+)$/.exec(descr);
  const dtype = m ? KIND_SIZE_TO_DTYPE[`${m[2]}${m[3]}`] : undefined;
  if (!m || !dtype) throw formatError('ERR_PENSTOCK_NPY_UNSUPPORTED_DTYPE', `the dtype ${JSON.stringify(descr)} is not a plain numeric or boolean type`, { path });
  if (m[1] === '>' && Number(m[3]) > 1)
    throw formatError('ERR_PENSTOCK_NPY_BIG_ENDIAN', `the data is big-endian (${descr}); save it little-endian (numpy: a.astype(a.dtype.newbyteorder('<')))`, { path });
  const shape = shapeV as number[];
  // A dimension of 0 anywhere leaves no elements, whatever the others.
  let elements = shape.includes(0) ? 0 : 1;
  for (const d of elements > 0 ? shape : []) {
    elements *= d;
    if (!Number.isSafeInteger(elements)) throw formatError('ERR_PENSTOCK_NPY_BAD_HEADER', 'the shape has more elements than can be addressed', { path });
  }
  const byteLength = byteLengthOf(dtype, elements)!;
  if (total + byteLength > fileSize)
    throw formatError('ERR_PENSTOCK_NPY_TRUNCATED', `the data (${byteLength} bytes from offset ${total}) runs past the end of the file (${fileSize} bytes)`, { path });
  return { version, descr, dtype, fortranOrder: fortran, shape, elements, strides: contiguousStrides(shape, fortran), dataStart: total, byteLength };
}

type PyValue = string | boolean | number[] | PyValue[];

/** Reads the dictionary literal numpy writes: string keys; string, bool and int-tuple values. */
function parseHeaderDict(text: string, path?: string): Map<string, PyValue> {
  let i = 0;
  const bad = (why: string): never => {
    throw formatError('ERR_PENSTOCK_NPY_BAD_HEADER', `the header dictionary is malformed (${why} at character ${i})`, { path });
  };
  const ws = () => {
    while (i < text.length && /\s/.test(text[i]!)) i++;
  };
  const str = (): string => {
    const q = text[i];
    const end = text.indexOf(q!, i + 1);
    if (end < 0) bad('unterminated string');
    const s = text.slice(i + 1, end);
    if (s.includes('\\')) bad('escapes are not expected');
    i = end + 1;
    return s;
  };
  let depth = 0;
  const value = (): PyValue => {
    ws();
    const c = text[i];
    if (c === "'" || c === '"') return str();
    if (text.startsWith('True', i)) return (i += 4), true;
    if (text.startsWith('False', i)) return (i += 5), false;
    if (c === '(' || c === '[') {
      const close = c === '(' ? ')' : ']';
      if (++depth > MAX_NPY_NESTING) throw formatError('ERR_PENSTOCK_NPY_TOO_DEEP', `the header dictionary nests brackets deeper than ${MAX_NPY_NESTING} levels`, { path });
      i++;
      const items: PyValue[] = [];
      for (;;) {
        ws();
        if (text[i] === close) {
          i++;
          depth--;
          return items as PyValue;
        }
        const num = /^\d+/.exec(text.slice(i, i + 24));
        if (num) {
          const n = Number(num[0]);
          if (!Number.isSafeInteger(n)) bad('a dimension too large');
          items.push(n as unknown as PyValue);
          i += num[0].length;
        } else items.push(value());
        ws();
        if (text[i] === ',') i++;
        else if (text[i] !== close) bad(`expected ',' or '${close}'`);
      }
    }
    return bad('unexpected value');
  };
  const out = new Map<string, PyValue>();
  ws();
  if (text[i] !== '{') bad("expected '{'");
  i++;
  for (;;) {
    ws();
    if (text[i] === '}') {
      i++;
      break;
    }
    if (text[i] !== "'" && text[i] !== '"') bad('expected a string key');
    const key = str();
    ws();
    if (text[i] !== ':') bad("expected ':'");
    i++;
    if (out.has(key)) bad(`duplicate key '${key}'`);
    out.set(key, value());
    ws();
    if (text[i] === ',') i++;
    else if (text[i] !== '}') bad("expected ',' or '}'");
  }
  ws();
  if (i !== text.length) bad('text after the dictionary');
  const shape = out.get('shape');
  if (Array.isArray(shape) && shape.some((d) => typeof d !== 'number')) bad('the shape holds something other than integers');
  return out;
}
