/** Host memory in any of the forms users hold it: Buffer, TypedArray, DataView, ArrayBuffer, PinnedBuffer. */
import { usage } from './errors.js';
import { PinnedBuffer } from './pinned-buffer.js';
import { describe } from './validate.js';

/** Anything penstock accepts as host memory. */
export type HostMemory = ArrayBufferView | ArrayBuffer | SharedArrayBuffer | PinnedBuffer;

export interface HostRegion {
  buffer: ArrayBuffer | SharedArrayBuffer;
  offset: number;
  length: number;
  /** Set when the memory belongs to a PinnedBuffer (which then must not be freed mid-operation). */
  pinned?: PinnedBuffer;
}

export function isHostMemory(x: unknown): x is HostMemory {
  return (
    x instanceof PinnedBuffer ||
    ArrayBuffer.isView(x) ||
    x instanceof ArrayBuffer ||
    (typeof SharedArrayBuffer !== 'undefined' && x instanceof SharedArrayBuffer)
  );
}

export function hostRegion(x: HostMemory, what = 'buffer'): HostRegion {
  if (x instanceof PinnedBuffer) {
    if (x.freed) throw usage('ERR_PENSTOCK_FREED', `The ${what} (a PinnedBuffer) was freed`);
    return { buffer: x.buffer, offset: 0, length: x.byteLength, pinned: x };
  }
  if (ArrayBuffer.isView(x)) {
    const r: HostRegion = { buffer: x.buffer as ArrayBuffer, offset: x.byteOffset, length: x.byteLength };
    const owner = PinnedBuffer.ownerOf(x.buffer);
    if (owner) {
      if (owner.freed) throw usage('ERR_PENSTOCK_FREED', `The ${what} is a view of a freed PinnedBuffer`);
      r.pinned = owner;
    }
    return r;
  }
  if (x instanceof ArrayBuffer || (typeof SharedArrayBuffer !== 'undefined' && x instanceof SharedArrayBuffer)) {
    const r: HostRegion = { buffer: x, offset: 0, length: x.byteLength };
    const owner = PinnedBuffer.ownerOf(x);
    if (owner) r.pinned = owner;
    return r;
  }
  throw usage('ERR_PENSTOCK_INVALID_BUFFER', `Expected a DeviceBuffer, PinnedBuffer, Buffer, TypedArray, DataView or ArrayBuffer as the ${what}, got ${describe(x)}`);
}
