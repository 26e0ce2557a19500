/**
 * Host memory in any of the forms users hold it: Buffer, TypedArray, DataView, ArrayBuffer,
 * SharedArrayBuffer, PinnedBuffer.
 *
 * Sizes and offsets come from the engine, never from properties of the object: the getters of
 * the built-in prototypes are captured when this module loads, so an own `byteLength` property,
 * a subclass getter or a shadowed `byteOffset` changes nothing (native code checks the range
 * again against the engine's own record of the view).
 *
 * The memory must stay where it is, and of its size, until the operation settles:
 * - resizable ArrayBuffers and growable SharedArrayBuffers are refused (they can shrink under a
 *   running task);
 * - an ArrayBuffer given to an operation is marked untransferable (`markAsUntransferable` of
 *   `node:worker_threads`), so `postMessage` and `structuredClone` cannot move its memory to
 *   another owner who might free it while tasks still write into it. Node-API has no way to pin
 *   a buffer for the duration of an operation only, so the mark is permanent: a later transfer
 *   copies the buffer (Node 20) or throws (later Node versions) instead of moving it. Node's own
 *   pooled Buffers are marked the same way by Node.
 * - the operation holds a reference to the view, so the memory is not collected under it.
 */
import { types } from 'node:util';
import { markAsUntransferable } from 'node:worker_threads';
import { usage } from '../vocabulary/errors.js';
import { PinnedBuffer } from './pinned-buffer.js';
import { describe } from '../vocabulary/validate.js';

/** Error codes raised for host memory. */
export const HOST_MEMORY_ERROR_CODES = {
  ERR_PENSTOCK_RESIZABLE_BUFFER: 'a resizable ArrayBuffer or growable SharedArrayBuffer, which could shrink under an operation',
} as const;

/** Anything penstock accepts as host memory. */
export type HostMemory = ArrayBufferView | ArrayBuffer | SharedArrayBuffer | PinnedBuffer;

/** Host memory as native code receives it: a view or ArrayBuffer, with the engine's sizes. */
export interface HostRegion {
  /** What native code resolves (by the engine's info, never by properties). */
  view: ArrayBufferView | ArrayBuffer;
  /** Byte offset of the region inside `view`. */
  offset: number;
  length: number;
  /** Set when the memory belongs to a PinnedBuffer (which then must not be freed mid-operation). */
  pinned?: PinnedBuffer;
}

const apply = Reflect.apply;
function getter<T>(proto: object, name: string): (self: unknown) => T {
  const get = Object.getOwnPropertyDescriptor(proto, name)?.get;
  if (!get) return () => undefined as T;
  return (self) => apply(get, self, []) as T;
}

const TypedArrayProto = Object.getPrototypeOf(Uint8Array.prototype) as object;
const typedByteLength = getter<number>(TypedArrayProto, 'byteLength');
const typedBuffer = getter<ArrayBufferLike>(TypedArrayProto, 'buffer');
const typedByteOffset = getter<number>(TypedArrayProto, 'byteOffset');
const viewByteLength = getter<number>(DataView.prototype, 'byteLength');
const viewBuffer = getter<ArrayBufferLike>(DataView.prototype, 'buffer');
const viewByteOffset = getter<number>(DataView.prototype, 'byteOffset');
const abByteLength = getter<number>(ArrayBuffer.prototype, 'byteLength');
const abResizable = getter<boolean | undefined>(ArrayBuffer.prototype, 'resizable');
const sabByteLength = typeof SharedArrayBuffer !== 'undefined' ? getter<number>(SharedArrayBuffer.prototype, 'byteLength') : undefined;
const sabGrowable = typeof SharedArrayBuffer !== 'undefined' ? getter<boolean | undefined>(SharedArrayBuffer.prototype, 'growable') : undefined;
const isView = ArrayBuffer.isView;
// The engine's own brand checks: they cannot be fooled by prototypes or getters, and unlike
// calling a getter on the wrong kind of object they throw nothing (an exception per call cost
// microseconds, which a batch of 10 000 ranges paid 10 000 times).
const isTypedArray = (x: unknown): boolean => types.isTypedArray(x);
const isArrayBuffer = (x: unknown): x is ArrayBuffer => types.isArrayBuffer(x);
const isSharedArrayBuffer = (x: unknown): x is SharedArrayBuffer => types.isSharedArrayBuffer(x);
const U8 = Uint8Array;

/** Whether `x` is host memory penstock can use (by the engine's brand checks, not `instanceof`). */
export function isHostMemory(x: unknown): x is HostMemory {
  return x instanceof PinnedBuffer || isView(x) || isArrayBuffer(x) || isSharedArrayBuffer(x);
}

/** Refuses memory that can change size under an operation; marks an ArrayBuffer untransferable. */
function settle(buffer: ArrayBufferLike, what: string): void {
  if (isSharedArrayBuffer(buffer)) {
    if (sabGrowable?.(buffer))
      throw usage('ERR_PENSTOCK_RESIZABLE_BUFFER', `The ${what} is a growable SharedArrayBuffer; penstock needs memory of a fixed size (use one created without maxByteLength)`);
    return;
  }
  if (abResizable(buffer))
    throw usage('ERR_PENSTOCK_RESIZABLE_BUFFER', `The ${what} is a resizable ArrayBuffer; penstock needs memory of a fixed size (use one created without maxByteLength)`);
  if (abByteLength(buffer) === 0) return;
  markAsUntransferable(buffer);
}

/** The region of `x` an operation uses, with sizes from the engine; throws a typed error otherwise. */
export function hostRegion(x: HostMemory, what = 'buffer'): HostRegion {
  if (x instanceof PinnedBuffer) {
    if (x.freed) throw usage('ERR_PENSTOCK_FREED', `The ${what} (a PinnedBuffer) was freed`);
    return { view: x.buffer, offset: 0, length: x.byteLength, pinned: x };
  }
  let buffer: ArrayBufferLike;
  let r: HostRegion;
  if (isView(x)) {
    const typed = isTypedArray(x);
    buffer = typed ? typedBuffer(x) : viewBuffer(x);
    r = { view: x, offset: 0, length: typed ? typedByteLength(x) : viewByteLength(x) };
  } else if (isArrayBuffer(x)) {
    buffer = x;
    r = { view: x, offset: 0, length: abByteLength(x) };
  } else if (isSharedArrayBuffer(x)) {
    // Node-API reads a SharedArrayBuffer's memory only through a view of it.
    buffer = x;
    r = { view: new U8(x), offset: 0, length: sabByteLength!(x) };
  } else {
    throw usage('ERR_PENSTOCK_INVALID_BUFFER', `Expected a DeviceBuffer, PinnedBuffer, Buffer, TypedArray, DataView, ArrayBuffer or SharedArrayBuffer as the ${what}, got ${describe(x)}`);
  }
  const owner = PinnedBuffer.ownerOf(buffer);
  if (owner) {
    if (owner.freed) throw usage('ERR_PENSTOCK_FREED', `The ${what} is a view of a freed PinnedBuffer`);
    r.pinned = owner;
  }
  settle(buffer, what);
  return r;
}

/**
 * A plain Uint8Array over `[offset, offset + length)` of a region, built from the engine's own
 * record of the view, for code that fills host memory from JS (remote bodies).
 */
export function regionBytes(r: HostRegion, offset = 0, length = r.length - offset): Uint8Array {
  const v = r.view;
  let buffer: ArrayBufferLike;
  let base: number;
  if (isView(v)) {
    const typed = isTypedArray(v);
    buffer = typed ? typedBuffer(v) : viewBuffer(v);
    base = typed ? typedByteOffset(v) : viewByteOffset(v);
  } else {
    buffer = v;
    base = 0;
  }
  return new U8(buffer, base + r.offset + offset, length);
}
