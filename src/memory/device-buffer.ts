/**
 * GPU memory: owned allocations on a chosen GPU, views of them, and wrapped foreign pointers.
 */
import { native } from '../addon/binding.js';
import { fromNative, usage } from '../vocabulary/errors.js';
import { hostRegion, type HostMemory, type HostRegion } from './host-memory.js';
import { Lifetime } from './lifetime.js';
import { call, checkDevice, requireCuda } from '../addon/runtime.js';
import { prepareDevice } from '../addon/gpu-preparation.js';
import { checkLength, checkRange, describe } from '../vocabulary/validate.js';
import { checkOptionKeys } from '../settings/option-keys.js';

/** The allocation a buffer and all its views share (reachable only through private fields). */
interface Root {
  readonly ptr: bigint;
  readonly device: number;
  readonly owned: boolean;
  /** A mapping of another process's memory (CUDA IPC): released by closing the mapping. */
  readonly imported: boolean;
  readonly lifetime: Lifetime;
  /** Holds that keep the memory after free() (IPC exports); the last one releases it. */
  readonly holds: { count: number };
}

function newRoot(ptr: bigint, device: number, owned: boolean, imported = false): Root {
  return Object.freeze({ ptr, device, owned, imported, lifetime: new Lifetime('This DeviceBuffer'), holds: { count: 0 } });
}

/** What releasing a root's memory needs: the owning GPU, the pointer, and how to let go. */
type Releasable = { ptr: bigint; device: number; imported: boolean };

function releaseMemory(m: Releasable): void {
  if (m.imported) native().ipcCloseMemHandle(m.device, m.ptr);
  else native().deviceFree(m.device, m.ptr);
}

/**
 * Owned allocations and imported mappings that become unreachable without free() are released
 * here, so a forgotten buffer costs GPU memory only until the next collection. The registry
 * holds the root, which every view references, so memory is never freed under a live view.
 */
const collector = new FinalizationRegistry<Releasable>((held) => {
  try {
    releaseMemory(held);
  } catch {
    // Nothing to report to: the buffer is gone. A failure here means the context is gone too.
  }
});

function releaseRoot(root: Root): void {
  if ((root.owned || root.imported) && root.ptr !== 0n) {
    collector.unregister(root);
    call(() => releaseMemory(root));
  }
}

/** @internal Where a buffer's memory comes from, for IPC export (src/ipc/handles.ts). */
export interface AllocationFacts {
  /** `alloc`: penstock's own cuMemAlloc; `wrap`: borrowed; `ipc`: mapped from another process. */
  origin: 'alloc' | 'wrap' | 'ipc';
  /** The allocation's (or mapping's) base address, and the view's byte offset from it. */
  base: bigint;
  offset: number;
  device: number;
  /** Keeps the memory allocated past free() until the returned function is called (once). */
  hold(): () => void;
}

/** Options of `DeviceBuffer.alloc` and `DeviceBuffer.wrap`. */
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
  readonly #byteLength: number;

  private constructor(root: Root, offset: number, byteLength: number) {
    this.#root = root;
    this.#offset = offset;
    this.#byteLength = byteLength;
  }

  /** Size in bytes. */
  get byteLength(): number {
    return this.#byteLength;
  }

  /**
   * Allocates `size` bytes on a GPU. The first allocation on a GPU also prepares penstock's
   * staging resources for it (pinned bounce buffers, streams), so later reads start at full speed.
   */
  static alloc(size: number, options: DeviceBufferOptions = {}): DeviceBuffer {
    checkLength(size, 'size');
    checkOptionKeys('DeviceBuffer.alloc', options);
    const device = options.device ?? 0;
    requireCuda();
    checkDevice(device);
    prepareDevice(device, size);
    const ptr = size === 0 ? 0n : call(() => native().deviceAlloc(device, size));
    const root = newRoot(ptr, device, true);
    if (ptr !== 0n) collector.register(root, { ptr, device, imported: false }, root);
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
    checkOptionKeys('DeviceBuffer.wrap', options);
    requireCuda();
    const info = call(() => native().pointerInfo(ptr));
    if (options.device !== undefined && options.device !== info.device)
      throw usage('ERR_PENSTOCK_INVALID_DEVICE', `The pointer belongs to GPU ${info.device}, not GPU ${options.device}`);
    const end = info.base + BigInt(info.size);
    if (ptr + BigInt(byteLength) > end)
      throw usage('ERR_PENSTOCK_OUT_OF_RANGE', `${byteLength} bytes from that pointer run past the end of its allocation`);
    prepareDevice(info.device, byteLength);
    return new DeviceBuffer(newRoot(ptr, info.device, false), 0, byteLength);
  }

  /**
   * @internal A buffer over a CUDA IPC mapping whose base is `base` on `device`: the view
   * `[offset, offset + byteLength)`. It does not own the memory; free() (or collection) closes
   * the mapping.
   */
  static fromIpcMapping(base: bigint, device: number, offset: number, byteLength: number): DeviceBuffer {
    const root = newRoot(base, device, false, true);
    collector.register(root, { ptr: base, device, imported: true }, root);
    return new DeviceBuffer(root, offset, byteLength);
  }

  /** @internal What IPC export needs to know of this buffer's memory (throws when freed). */
  static allocationFacts(buffer: DeviceBuffer): AllocationFacts {
    buffer.assertLive();
    const root = buffer.#root;
    return {
      origin: root.imported ? 'ipc' : root.owned ? 'alloc' : 'wrap',
      base: root.ptr,
      offset: buffer.#offset,
      device: root.device,
      hold: () => {
        root.holds.count++;
        let held = true;
        return () => {
          if (!held) return;
          held = false;
          if (--root.holds.count === 0 && root.lifetime.ended) releaseRoot(root);
        };
      },
    };
  }

  /** The GPU ordinal that holds this memory. */
  get device(): number {
    return this.#root.device;
  }

  /** Whether this buffer owns its allocation (false for wrapped memory and views' roots alike). */
  get owned(): boolean {
    return this.#root.owned;
  }

  /** Whether the memory was freed (by `free()`, `using`, or the buffer it is a view of). */
  get freed(): boolean {
    return this.#root.lifetime.ended;
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
    checkOptionKeys('copyFrom', options);
    const offset = options.offset ?? 0;
    checkLength(offset, 'offset');
    checkRange(offset, src.length, this.byteLength, 'DeviceBuffer');
    if (src.length === 0) return;
    await this.#withBusy(src, () =>
      native().copyHostToDevice(this.device, this.ptr + BigInt(offset), src.view, src.offset, src.length).promise,
    );
  }

  /** Copies `size` bytes (default: as many as fit) from `offset` of this buffer into host memory. */
  async copyTo(target: HostMemory, options: { offset?: number; size?: number } = {}): Promise<void> {
    const dst = hostRegion(target, 'target');
    checkOptionKeys('copyTo', options);
    const offset = options.offset ?? 0;
    checkLength(offset, 'offset');
    const size = options.size ?? Math.min(dst.length, Math.max(0, this.byteLength - offset));
    checkLength(size, 'size');
    checkRange(offset, size, this.byteLength, 'DeviceBuffer');
    checkRange(0, size, dst.length, 'target');
    if (size === 0) return;
    await this.#withBusy(dst, () =>
      native().copyDeviceToHost(this.device, dst.view, dst.offset, this.ptr + BigInt(offset), size).promise,
    );
  }

  /** A new Buffer holding a copy of this memory. */
  async toBuffer(): Promise<Buffer> {
    const out = Buffer.allocUnsafeSlow(this.byteLength);
    await this.copyTo(out);
    return out;
  }

  /**
   * Frees the allocation (owned buffers), closes the mapping (imported ones) or forgets the
   * pointer (wrapped ones). Idempotent. Every view of the same memory becomes freed. Refuses
   * while an operation uses the memory. Memory exported through CUDA IPC stays allocated until
   * its last export is released.
   */
  free(): void {
    const root = this.#root;
    if (!root.lifetime.end()) return;
    if (root.holds.count === 0) releaseRoot(root);
  }

  /** Frees the memory at the end of a `using` block (as `free()`). */
  [Symbol.dispose](): void {
    this.free();
  }

  /** @internal Throws a clear error when the memory was freed. */
  assertLive(): void {
    this.#root.lifetime.assertLive();
  }

  /** @internal Marks the memory busy until the returned function is called (once). */
  retain(): () => void {
    return this.#root.lifetime.enter();
  }

  /** @internal Marks the memory busy for the duration of `fn`'s promise. */
  async withBusy<T>(fn: () => Promise<T>): Promise<T> {
    // `return await`, so that async stack traces reach the caller through here.
    return await this.#withBusy(undefined, fn);
  }

  async #withBusy<T>(host: HostRegion | undefined, fn: () => Promise<T>): Promise<T> {
    const run = host?.pinned ? () => host.pinned!.use(fn) : fn;
    try {
      return await this.#root.lifetime.use(run);
    } catch (err) {
      throw fromNative(err);
    }
  }
}
