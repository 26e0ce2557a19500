/**
 * Page-locked (pinned) host memory, exposed as a real ArrayBuffer over the same bytes.
 */
import { markAsUntransferable } from 'node:worker_threads';
import { native } from '../addon/binding.js';
import { usage } from '../vocabulary/errors.js';
import { Lifetime } from './lifetime.js';
import { call, requireCuda } from '../addon/runtime.js';
import { checkLength } from '../vocabulary/validate.js';

const owners = new WeakMap<ArrayBufferLike, PinnedBuffer>();

/**
 * Host memory that the GPU can copy from and to by DMA. Reads and writes between files, pinned
 * memory and the GPU use it without an extra copy. `free()` releases it at once (every view of
 * it becomes empty); otherwise it is freed when garbage collected. It is never freed while an
 * operation uses it: native code holds the memory until the operation's last task is done.
 */
export class PinnedBuffer {
  #buffer: ArrayBuffer | undefined;
  #bytes: Uint8Array | undefined;
  readonly #byteLength: number;
  readonly #lifetime = new Lifetime('This PinnedBuffer');

  private constructor(buffer: ArrayBuffer, byteLength: number) {
    this.#buffer = buffer;
    this.#byteLength = byteLength;
    // Its memory must never move to another owner (whose collection would free it).
    markAsUntransferable(buffer);
    owners.set(buffer, this);
  }

  /** Allocates `size` bytes of pinned memory (needs the CUDA driver). */
  static alloc(size: number): PinnedBuffer {
    checkLength(size, 'size');
    if (size === 0) throw usage('ERR_PENSTOCK_INVALID_SIZE', 'A pinned buffer must hold at least one byte');
    requireCuda();
    return new PinnedBuffer(call(() => native().pinnedAlloc(size)), size);
  }

  /** @internal A buffer of no bytes (nothing is allocated; `free()` just empties it). */
  static empty(): PinnedBuffer {
    return new PinnedBuffer(new ArrayBuffer(0), 0);
  }

  /** The PinnedBuffer that owns `buffer`, if any (for views made from `.buffer`). */
  static ownerOf(buffer: ArrayBufferLike): PinnedBuffer | undefined {
    return owners.get(buffer);
  }

  /** Size in bytes. */
  get byteLength(): number {
    return this.#byteLength;
  }

  /** Whether the memory was freed (by `free()` or a `using` block). */
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
    this.#lifetime.end();
    const b = this.#buffer;
    this.#buffer = undefined;
    this.#bytes = undefined;
    if (this.#byteLength > 0) native().pinnedFree(b);
  }

  /** Frees the memory at the end of a `using` block (as `free()`). */
  [Symbol.dispose](): void {
    this.free();
  }

  /** @internal Counts one use of this memory until the returned function is called (once). */
  retain(): () => void {
    return this.#lifetime.enter();
  }

  /** @internal Runs `fn` as one use of this memory (free() refuses until it settles). */
  use<T>(fn: () => Promise<T>): Promise<T> {
    return this.#lifetime.use(fn);
  }
}
