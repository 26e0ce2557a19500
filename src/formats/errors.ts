/**
 * The typed errors of tensor files: every way a safetensors header, a sharded index or a .npy
 * header can be wrong has its own code, raised before any data moves.
 */
import { PenstockError } from '../vocabulary/errors.js';

/** Every error code of tensor loading, with its meaning (gathered into the project's error catalog). */
export const TENSOR_ERROR_CODES = {
  ERR_PENSTOCK_TENSOR_FILE_TOO_SMALL: 'The file is shorter than the 8-byte header length of a safetensors file.',
  ERR_PENSTOCK_TENSOR_HEADER_PAST_FILE: 'The header length runs past the end of the file.',
  ERR_PENSTOCK_TENSOR_HEADER_TOO_LARGE: 'The header length is beyond the 100 MB limit (an absurd or corrupt length).',
  ERR_PENSTOCK_TENSOR_HEADER_TOO_SHORT: 'The header length is too small to hold a JSON object.',
  ERR_PENSTOCK_TENSOR_HEADER_NOT_UTF8: 'The header bytes are not valid UTF-8.',
  ERR_PENSTOCK_TENSOR_HEADER_NOT_JSON: 'The header is not valid JSON.',
  ERR_PENSTOCK_TENSOR_HEADER_TOO_DEEP: 'The header JSON nests deeper than any tensor header needs.',
  ERR_PENSTOCK_TENSOR_HEADER_NOT_OBJECT: 'The header JSON is not an object.',
  ERR_PENSTOCK_TENSOR_HEADER_BAD_PADDING: 'The bytes after the header JSON are not the spaces the format allows as padding.',
  ERR_PENSTOCK_TENSOR_DUPLICATE_NAME: 'A tensor name appears twice (in one header, or in two files of one checkpoint).',
  ERR_PENSTOCK_TENSOR_EMPTY_NAME: 'A tensor has an empty name.',
  ERR_PENSTOCK_TENSOR_BAD_METADATA: '__metadata__ is not an object of string values.',
  ERR_PENSTOCK_TENSOR_ENTRY_NOT_OBJECT: "A tensor's entry is not an object.",
  ERR_PENSTOCK_TENSOR_MISSING_FIELD: 'A tensor entry lacks dtype, shape or data_offsets.',
  ERR_PENSTOCK_TENSOR_UNKNOWN_DTYPE: 'A tensor has a dtype the format does not define.',
  ERR_PENSTOCK_TENSOR_BAD_SHAPE: 'A shape is not an array of non-negative integers.',
  ERR_PENSTOCK_TENSOR_SHAPE_OVERFLOW: "A shape's element count is beyond what can be addressed.",
  ERR_PENSTOCK_TENSOR_SUB_BYTE_PACKING: 'A sub-byte tensor (F4, F6) does not fill a whole number of bytes.',
  ERR_PENSTOCK_TENSOR_BAD_OFFSETS: 'data_offsets is not a pair of non-negative integers.',
  ERR_PENSTOCK_TENSOR_OFFSETS_OUT_OF_ORDER: 'A tensor ends before it begins (data_offsets reversed).',
  ERR_PENSTOCK_TENSOR_OUTSIDE_DATA: "A tensor's bytes lie past the end of the data section.",
  ERR_PENSTOCK_TENSOR_OVERLAP: 'Two tensors claim the same bytes.',
  ERR_PENSTOCK_TENSOR_SIZE_MISMATCH: "A tensor's byte length does not match its dtype times its shape.",
  ERR_PENSTOCK_TENSOR_INDEX_INVALID: 'A sharded index is not JSON with a weight_map of tensor names to file names.',
  ERR_PENSTOCK_TENSOR_INDEX_BAD_PATH: 'A shard path in an index is absolute or leaves the index directory.',
  ERR_PENSTOCK_TENSOR_INDEX_MISMATCH: 'A tensor listed in an index is not in the shard it names (or is in a shard not listed for it).',
  ERR_PENSTOCK_TENSOR_NO_CHECKPOINT: 'A model directory holds no checkpoint (no model.safetensors.index.json, no model.safetensors, no *.safetensors file), or several indexes and none of them the usual one.',
  ERR_PENSTOCK_TENSOR_UNKNOWN_FORMAT: 'A path is neither a safetensors file, a sharded index nor a .npy file.',
  ERR_PENSTOCK_TENSOR_NOT_FOUND: 'A tensor named in a filter is not in the checkpoint.',
  ERR_PENSTOCK_TENSOR_ROW_SPLIT: 'A row range cannot be taken (bad shard numbers, or rows of a sub-byte tensor that do not start on a byte).',
  ERR_PENSTOCK_TENSOR_SOURCE_CHANGED: 'A file was shorter when its data was read than when its header was parsed.',
  ERR_PENSTOCK_TENSOR_SET_FREED: 'The tensor set was freed; its views are gone.',
  ERR_PENSTOCK_TENSOR_VERIFY_MISMATCH: "A tensor's bytes in memory differ from its bytes in the file.",
  ERR_PENSTOCK_NPY_BAD_MAGIC: 'The file does not start with the .npy magic string.',
  ERR_PENSTOCK_NPY_BAD_VERSION: 'The .npy format version is not 1.0, 2.0 or 3.0.',
  ERR_PENSTOCK_NPY_TRUNCATED: 'The .npy file ends inside its header or its data.',
  ERR_PENSTOCK_NPY_HEADER_TOO_LARGE: "The .npy header length is beyond 10 000 bytes (numpy's own default limit); refused before it is read.",
  ERR_PENSTOCK_NPY_TOO_DEEP: 'The .npy header dictionary nests brackets deeper than any dtype or shape needs.',
  ERR_PENSTOCK_NPY_BAD_HEADER: 'The .npy header is not the dictionary literal the format defines.',
  ERR_PENSTOCK_NPY_UNSUPPORTED_DTYPE: 'The .npy dtype is not a plain numeric or boolean type (structured, object, string).',
  ERR_PENSTOCK_NPY_BIG_ENDIAN: 'The .npy data is big-endian, which penstock refuses rather than deliver swapped bytes.',
} as const;

/** One of {@link TENSOR_ERROR_CODES}. */
export type TensorErrorCode = keyof typeof TENSOR_ERROR_CODES;

/** A tensor file, index or header that breaks the format; `code` says how, `path` which file. */
export class TensorFormatError extends PenstockError {
  /** The file (or index) the problem was found in, when known. */
  readonly path?: string;
  /** The tensor concerned, when there is one. */
  readonly tensor?: string;
  /** An error with a tensor error code, its message, and the file and tensor it concerns. */
  constructor(code: TensorErrorCode, message: string, where: { path?: string; tensor?: string } = {}) {
    super(code, where.path ? `${where.path}: ${message}` : message);
    this.name = 'TensorFormatError';
    if (where.path !== undefined) this.path = where.path;
    if (where.tensor !== undefined) this.tensor = where.tensor;
  }
}

/** Shorthand used by the parsers. */
export function formatError(code: TensorErrorCode, message: string, where: { path?: string; tensor?: string } = {}): TensorFormatError {
  return new TensorFormatError(code, message, where);
}
