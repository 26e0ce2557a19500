/** Argument checks shared by the public classes: each throws a typed usage error. */
import { usage } from './errors.js';

/** Whether `value` is a non-negative safe integer (a length or an offset). */
export function isLength(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;
}

/** A byte count or offset: a non-negative safe integer. */
export function checkLength(value: unknown, name: string): asserts value is number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
    throw usage('ERR_PENSTOCK_INVALID_ARGUMENT', `${name} must be a non-negative integer, got ${describe(value)}`);
  }
}

/** Checks that [offset, offset+size) lies within `length`. */
export function checkRange(offset: number, size: number, length: number, what: string): void {
  if (offset > length || size > length - offset)
    throw usage(
      'ERR_PENSTOCK_OUT_OF_RANGE',
      `The range [${offset}, ${offset + size}) lies outside the ${what} of ${length} bytes`,
    );
}

export function describe(value: unknown): string {
  if (typeof value === 'bigint') return `${value}n`;
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'number' || typeof value === 'boolean' || value == null) return String(value);
  return Object.prototype.toString.call(value);
}
