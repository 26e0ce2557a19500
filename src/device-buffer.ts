/**
 * GPU memory: owned allocations on a chosen GPU, views of them, and wrapped foreign pointers.
 */
import { native } from './binding.js';
import { fromNative, usage } from './errors.js';
import { hostRegion, type HostMemory } from './host-memory.js';
import { call, checkDevice, prepareDevice, requireCuda } from './runtime.js';
import { checkLength, checkRange, describe } from './validate.js';

/** The allocation a buffer and all its views share. */
interface Root {
  ptr: bigint;
  device: number;
  owned: boolean;
  freed: boolean;
  busy: number;
}

/**
 * Owned allocations that become unreachable without free() are freed here, so a forgotten
 * buffer costs GPU memory only until the next collection. The registry holds the root, which
 * every view references, so memory is never freed under a live view.
 */
const collector = new FinalizationRegistry<{ ptr: bigint; device: number }>((held) => {
  try {
    native().deviceFree(held.device, held.ptr);
  } catch {
    // Nothing to report to: the buffer is gone. A failure here means the context is gone too.
  }
});

export interface DeviceBufferOptions {
  /** GPU ordinal; default 0. */
  device?: number;
}

/**
 * A range of GPU memory. `DeviceBuffer.alloc()` owns its memory and frees it with `free()` (or
 * `using`); `subarray()` makes views that share it; `DeviceBuffer.wrap()` borrows memory that
 * something else (a framework, another library) owns.
 */
export class DeviceBuffer {
  readonly #root: Root;
  readonly #offset: number;
  /** Size in bytes. */
  readonly byteLength: number;

  private constructor(root: Root, offset: number, byteLength: number) {
    this.#root = root;
    this.#offset = offset;
    this.byteLength = byteLength;
  }

  /**
   * Allocates `size` bytes on a GPU. The first allocation on a GPU also prepares penstock's
   * staging resources for it (pinned bounce buffers, streams), so later reads start at full speed.
   */
  static alloc(size: number, options: DeviceBufferOptions = {}): DeviceBuffer {
    checkLength(size, 'size');
    const device = options.device ?? 0;
    requireCuda();
    checkDevice(device);
    prepareDevice(device);
    const ptr = size === 0 ? 0n : call(() => native().deviceAlloc(device, size));
    const root: Root = { ptr, device, owned: true, freed: false, busy: 0 };
    if (ptr !== 0n) collector.register(root, { ptr, device }, root);
    return new DeviceBuffer(root, 0, size);
  }

  /**
   * Wraps device memory owned elsewhere, without taking ownership: `free()` only forgets it.
   * The pointer must be CUDA device memory with `byteLength` bytes inside one allocation; the
   * owning GPU is found from the pointer (and must match `options.device` when given).
   */
  static wrap(ptr: bigint, byteLength: number, options: DeviceBufferOptions = {}): DeviceBuffer {
    if (typeof ptr !== 'bigint' || ptr <= 0n)
      throw usage('ERR_PENSTOCK_INVALID_ARGUMENT', `ptr must be a positive bigint device address, got ${describe(ptr)}`);
    checkLength(byteLength, 'byteLength');
    requireCuda();
    const info = call(() => native().pointerInfo(ptr));
    if (options.device !== undefined && options.device !== info.device)
      throw usage('ERR_PENSTOCK_INVALID_DEVICE', `The pointer belongs to GPU ${info.device}, not GPU ${options.device}`);
    const end = info.base + BigInt(info.size);
    if (ptr + BigInt(byteLength) > end)
      throw usage('ERR_PENSTOCK_OUT_OF_RANGE', `${byteLength} bytes from that pointer run past the end of its allocation`);
    prepareDevice(info.device);
    return new DeviceBuffer({ ptr, device: info.device, owned: false, freed: false, busy: 0 }, 0, byteLength);
  }

  /** The GPU ordinal that holds this memory. */
  get device(): number {
    return this.#root.device;
  }

  /** Whether this buffer owns its allocation (false for wrapped memory and views' roots alike). */
  get owned(): boolean {
    return this.#root.owned;
  }

  get freed(): boolean {
    return this.#root.freed;
  }

  /** The device address as a bigint (for handing to other CUDA code). */
  get ptr(): bigint {
    this.assertLive();
    return this.#root.ptr + BigInt(this.#offset);
  }

  /** A view of `[begin, end)` sharing this memory (no copy). */
  subarray(begin = 0, end = this.byteLength): DeviceBuffer {
    checkLength(begin, 'begin');
    checkLength(end, 'end');
    if (end < begin) throw usage('ERR_PENSTOCK_OUT_OF_RANGE', `end (${end}) is before begin (${begin})`);
    checkRange(begin, end - begin, this.byteLength, 'DeviceBuffer');
    this.assertLive();
    return new DeviceBuffer(this.#root, this.#offset + begin, end - begin);
  }

  /** Copies host memory into this buffer at `offset` (default 0). */
  async copyFrom(source: HostMemory, options: { offset?: number } = {}): Promise<void> {
    const src = hostRegion(source, 'source');
    const offset = options.offset ?? 0;
    checkLength(offset, 'offset');
    checkRange(offset, src.length, this.byteLength, 'DeviceBuffer');
    if (src.length === 0) return;
    await this.#withBusy(src.pinned, () =>
      native().copyHostToDevice(this.device, this.ptr + BigInt(offset), src.buffer, src.offset, src.length).promise,
    );
  }

  /** Copies `size` bytes (default: as many as fit) from `offset` of this buffer into host memory. */
  async copyTo(target: HostMemory, options: { offset?: number; size?: number } = {}): Promise<void> {
    const dst = hostRegion(target, 'target');
    const offset = options.offset ?? 0;
    checkLength(offset, 'offset');
    const size = options.size ?? Math.min(dst.length, Math.max(0, this.byteLength - offset));
    checkLength(size, 'size');
    checkRange(offset, size, this.byteLength, 'DeviceBuffer');
    checkRange(0, size, dst.length, 'target');
    if (size === 0) return;
    await this.#withBusy(dst.pinned, () =>
      native().copyDeviceToHost(this.device, dst.buffer, dst.offset, this.ptr + BigInt(offset), size).promise,
    );
  }

  /** A new Buffer holding a copy of this memory. */
  async toBuffer(): Promise<Buffer> {
    const out = Buffer.allocUnsafeSlow(this.byteLength);
    await this.copyTo(out);
    return out;
  }

  /**
   * Frees the allocation (owned buffers) or forgets the pointer (wrapped ones). Idempotent.
   * Every view of the same memory becomes freed. Refuses while an operation uses the memory.
   */
  free(): void {
    const root = this.#root;
    if (root.freed) return;
    if (root.busy > 0) throw usage('ERR_PENSTOCK_BUFFER_BUSY', 'This DeviceBuffer is in use by an operation in flight');
    root.freed = true;
    if (root.owned && root.ptr !== 0n) {
      collector.unregister(root);
      call(() => native().deviceFree(root.device, root.ptr));
    }
  }

  [Symbol.dispose](): void {
    this.free();
  }

  /** @internal Throws a clear error when the memory was freed. */
  assertLive(): void {
    if (this.#root.freed) throw usage('ERR_PENSTOCK_FREED', 'This DeviceBuffer was freed');
  }

  /** @internal Marks the memory busy until the returned function is called (once). */
  retain(): () => void {
    this.assertLive();
    const root = this.#root;
    root.busy++;
    let held = true;
    return () => {
      if (held) root.busy--;
      held = false;
    };
  }

  /** @internal Marks the memory busy for the duration of `fn`'s promise. */
  async withBusy<T>(fn: () => Promise<T>): Promise<T> {
    // `return await`, so that async stack traces reach the caller through here.
    return await this.#withBusy(undefined, fn);
  }

  async #withBusy<T>(pinned: { busy: number } | undefined, fn: () => Promise<T>): Promise<T> {
    this.assertLive();
    this.#root.busy++;
    if (pinned) pinned.busy++;
    try {
      return await fn();
    } catch (err) {
      throw fromNative(err);
    } finally {
      this.#root.busy--;
      if (pinned) pinned.busy--;
    }
  }
}
