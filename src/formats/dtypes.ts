/**
 * The safetensors dtypes and their sizes in bits. Sub-byte types (F4 two to a byte, F6 four to
 * three bytes) are packed without gaps, so a tensor of them must fill a whole number of bytes.
 */

/** Bits per element of every dtype the safetensors format defines. */
export const DTYPE_BITS = {
  BOOL: 8,
  U8: 8,
  I8: 8,
  F8_E5M2: 8,
  F8_E4M3: 8,
  F8_E8M0: 8,
  F8_E4M3FNUZ: 8,
  F8_E5M2FNUZ: 8,
  I16: 16,
  U16: 16,
  F16: 16,
  BF16: 16,
  I32: 32,
  U32: 32,
  F32: 32,
  I64: 64,
  U64: 64,
  F64: 64,
  C64: 64,
  F4: 4,
  F6_E2M3: 6,
  F6_E3M2: 6,
} as const;

/** A safetensors dtype name. */
export type Dtype = keyof typeof DTYPE_BITS;

/** Every dtype the safetensors format defines: whole-byte types by width, then the sub-byte ones. */
export const DTYPES = Object.keys(DTYPE_BITS) as Dtype[];

/** Whether `name` is a dtype of the format (own keys only: `"constructor"` is not a dtype). */
export function isDtype(name: unknown): name is Dtype {
  return typeof name === 'string' && Object.prototype.hasOwnProperty.call(DTYPE_BITS, name);
}

/** Bits per element. */
export function dtypeBits(dtype: Dtype): number {
  return DTYPE_BITS[dtype];
}

/**
 * Bytes that `elements` elements of `dtype` occupy, or undefined when they do not fill a whole
 * number of bytes (sub-byte dtypes only).
 */
export function byteLengthOf(dtype: Dtype, elements: number): number | undefined {
  const bits = DTYPE_BITS[dtype];
  if (bits % 8 === 0) return elements * (bits / 8);
  // elements × bits may pass 2^53 only for counts no file can hold; checked by the caller's bounds.
  const total = elements * bits;
  return total % 8 === 0 ? total / 8 : undefined;
}

/**
 * Element strides (C order: the last dimension varies fastest; Fortran order: the first). Every
 * stride is a safe integer: a stride past 2^53 can arise only in a tensor with no elements (a
 * dimension of 0 beside huge ones, `[0, 2^40, 2^40]`), whose strides address nothing, and is 0.
 */
export function contiguousStrides(shape: readonly number[], fortran = false): number[] {
  const n = shape.length;
  // A matrix, the common case of a checkpoint of thousands of tensors, as a literal: an array of
  // exactly two small integers.
  if (n === 2 && !fortran && Number.isSafeInteger(shape[1]!)) return [shape[1]!, 1];
  const strides = new Array<number>(n);
  let step = 1;
  for (let k = 0; k < n; k++) {
    const i = fortran ? k : n - 1 - k;
    strides[i] = Number.isSafeInteger(step) ? step : 0;
    step *= shape[i]!;
  }
  return strides;
}
