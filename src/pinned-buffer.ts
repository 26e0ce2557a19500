/**
 * Page-locked (pinned) host memory, exposed as a real ArrayBuffer over the same bytes.
 */
import { native } from './binding.js';
import { usage } from './errors.js';
import { call, requireCuda } from './runtime.js';
import { checkLength } from './validate.js';

const owners = new WeakMap<ArrayBufferLike, PinnedBuffer>();

/**
 * Host memory that the GPU can copy from and to by DMA. Reads and writes between files, pinned
 * memory and the GPU use it without an extra copy. `free()` releases it at once (every view of
 * it becomes empty); otherwise it is freed when garbage collected.
 */
export class PinnedBuffer {
  #buffer: ArrayBuffer | undefined;
  #bytes: Uint8Array | undefined;
  /** Size in bytes. */
  readonly byteLength: number;
  /** Operations in flight that use this memory. */
  busy = 0;

  private constructor(buffer: ArrayBuffer) {
    this.#buffer = buffer;
    this.byteLength = buffer.byteLength;
    owners.set(buffer, this);
  }

  /** Allocates `size` bytes of pinned memory (needs the CUDA driver). */
  static alloc(size: number): PinnedBuffer {
    checkLength(size, 'size');
    if (size === 0) throw usage('ERR_PENSTOCK_INVALID_SIZE', 'A pinned buffer must hold at least one byte');
    requireCuda();
    return new PinnedBuffer(call(() => native().pinnedAlloc(size)));
  }

  /** The PinnedBuffer that owns `buffer`, if any (for views made from `.buffer`). */
  static ownerOf(buffer: ArrayBufferLike): PinnedBuffer | undefined {
    return owners.get(buffer);
  }

  /** Whether the memory was freed. */
  get freed(): boolean {
    return this.#buffer === undefined;
  }

  /** The memory as an ArrayBuffer (no copy). */
  get buffer(): ArrayBuffer {
    if (!this.#buffer) throw usage('ERR_PENSTOCK_FREED', 'This PinnedBuffer was freed');
    return this.#buffer;
  }

  /** A Uint8Array over the whole buffer (no copy). */
  get bytes(): Uint8Array {
    return (this.#bytes ??= new Uint8Array(this.buffer));
  }

  /** Frees the memory now. Idempotent; refuses while an operation uses the buffer. */
  free(): void {
    if (!this.#buffer) return;
    if (this.busy > 0) throw usage('ERR_PENSTOCK_BUFFER_BUSY', 'This PinnedBuffer is in use by an operation in flight');
    const b = this.#buffer;
    this.#buffer = undefined;
    this.#bytes = undefined;
    native().pinnedFree(b);
  }

  /** Frees the memory at the end of a `using` block (as `free()`). */
  [Symbol.dispose](): void {
    this.free();
  }
}
