/**
 * CUDA IPC hand-off: export a DeviceBuffer's memory so that another process (PyTorch, CuPy,
 * another Node process) maps the same bytes without a copy, and import such memory here.
 *
 * Lifetime contract (docs/ipc.md): the exporter owns the memory. An export keeps the
 * allocation alive past `free()` until the export is released explicitly; importers must be
 * done with it before then, which CUDA leaves to the processes involved.
 */
import { native } from '../addon/binding.js';
import { DeviceBuffer } from '../memory/device-buffer.js';
import { usage } from '../vocabulary/errors.js';
import { checkOptionKeys } from '../settings/option-keys.js';
import { handleBytes, parseIpcHandle, encodeIpcHandle, IPC_HANDLE_TYPE, IPC_HANDLE_VERSION, type IpcHandle } from './format.js';
import { call, checkDevice, deviceInfo, ensurePool, requireCuda } from '../addon/runtime.js';

export { IPC_ERROR_CODES, parseIpcHandle, encodeIpcHandle, type IpcHandle } from './format.js';

/**
 * CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS. The driver documents it as the flag every open must pass
 * (PyTorch and CuPy always do); it only matters when the memory lives on another GPU, which
 * penstock allows only when asked (`peerAccess`).
 */
const LAZY_ENABLE_PEER_ACCESS = 1;

/** Recognises this process's own handles, from any thread (pids repeat across PID namespaces). */
let processId: string | undefined;
const processToken = (): string => (processId ??= native().ipcProcessId());

/** Exports not yet released. Held here so that an export is never collected behind its importers. */
const liveExports = new Set<IpcExport>();

function requireIpc(): void {
  requireCuda();
  const s = native().ipcStatus();
  if (!s.available)
    throw usage('ERR_PENSTOCK_IPC_UNSUPPORTED', `CUDA IPC is unavailable: the CUDA driver lacks ${s.missing ?? 'its IPC functions'}`);
}

function notExportable(why: string): never {
  throw usage('ERR_PENSTOCK_IPC_NOT_EXPORTABLE', `This DeviceBuffer cannot be exported through CUDA IPC: ${why}`);
}

/**
 * A live export of a DeviceBuffer. `handle` (or `JSON.stringify(export)`, or `String(export)`
 * for base64) goes to the importing process. The exported memory stays allocated, even after
 * the buffer is freed, until `release()`.
 */
export class IpcExport {
  /** What an importer needs, as plain data. */
  readonly handle: Readonly<IpcHandle>;
  #release: (() => void) | undefined;

  /** @internal */
  constructor(handle: IpcHandle, release: () => void) {
    this.handle = Object.freeze(handle);
    this.#release = release;
    liveExports.add(this);
  }

  /** Whether `release()` has run. */
  get released(): boolean {
    return this.#release === undefined;
  }

  /**
   * Ends this export: the memory is freed now if its buffer was already freed and no other
   * export holds it. Importers must have closed their mappings first (CUDA does not check).
   * Idempotent.
   */
  release(): void {
    const release = this.#release;
    if (!release) return;
    this.#release = undefined;
    liveExports.delete(this);
    release();
  }

  /** Releases the export at the end of a `using` block (as `release()`). */
  [Symbol.dispose](): void {
    this.release();
  }

  /** The handle, for `JSON.stringify(export)`. */
  toJSON(): IpcHandle {
    return { ...this.handle };
  }

  /** The handle as one base64url string ({@link encodeIpcHandle}). */
  toString(): string {
    return encodeIpcHandle(this.handle);
  }
}

/** Exports that have not been released, in this process. */
export function liveIpcExports(): number {
  return liveExports.size;
}

/**
 * Exports a DeviceBuffer (or a view of one) through CUDA IPC. Only memory penstock allocated
 * can be exported: wrapped memory belongs to another allocator (export it from there), and
 * imported memory belongs to another process (hand on its original handle instead).
 */
export function exportDeviceBuffer(buffer: DeviceBuffer): IpcExport {
  if (!(buffer instanceof DeviceBuffer)) throw usage('ERR_PENSTOCK_INVALID_ARGUMENT', 'exportDeviceBuffer needs a DeviceBuffer');
  const facts = DeviceBuffer.allocationFacts(buffer);
  if (facts.origin === 'wrap')
    notExportable('it wraps memory another allocator owns (DeviceBuffer.wrap); export it from its owner');
  if (facts.origin === 'ipc')
    notExportable('it was imported from another process; hand on the original handle instead');
  if (facts.base === 0n) notExportable('it is empty (a 0-byte allocation has no device memory)');
  requireIpc();
  const { device, base } = facts;
  const pointer = call(() => native().ipcPointerFacts(device, base));
  if (pointer.legacyIpcCapable === false)
    notExportable('the CUDA driver reports that its allocation cannot be shared with cuIpcGetMemHandle (memory from a stream-ordered pool or a VMM allocation)');
  if (pointer.fromPool === true) notExportable('its memory comes from a stream-ordered memory pool');
  if (pointer.rangeStart !== undefined && pointer.rangeStart !== base)
    notExportable('it is not the start of a CUDA allocation');
  const bytes = call(() => native().ipcGetMemHandle(device, base));
  const allocationSize = pointer.rangeSize ?? call(() => native().pointerInfo(base)).size;
  const handle: IpcHandle = {
    type: IPC_HANDLE_TYPE,
    version: IPC_HANDLE_VERSION,
    handle: bytes.toString('base64'),
    offset: facts.offset,
    size: buffer.byteLength,
    allocationSize,
    device,
    pciBusId: deviceInfo(device).pciBusId,
    pid: process.pid,
    exporter: processToken(),
  };
  return new IpcExport(parseIpcHandle(handle), facts.hold());
}

/** Where an imported handle is mapped. */
export interface IpcImportOptions {
  /**
   * The GPU to map it on. Default: the GPU with the handle's PCI bus id. A different GPU is an
   * error unless `peerAccess` is true.
   */
  device?: number;
  /** Map memory of another GPU through peer access (CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS). */
  peerAccess?: boolean;
}

function localOrdinal(pciBusId: string): number | undefined {
  try {
    return native().deviceByPciBusId(pciBusId);
  } catch {
    return undefined;
  }
}

/**
 * Maps memory another process exported ({@link exportDeviceBuffer}) into this process. The
 * result does not own the memory: `free()` (or garbage collection) closes the mapping. Opening
 * one handle several times in a process gives the same device address each time (CUDA counts
 * the opens); every resulting buffer must be freed. Mapping is all it does: the GPU's staging
 * resources for file I/O (pinned bounce buffers, streams, cuFile's driver) are made by the first
 * read or write into the result.
 */
export function importDeviceBuffer(handle: IpcHandle | string, options: IpcImportOptions = {}): DeviceBuffer {
  checkOptionKeys('importDeviceBuffer', options);
  const h = parseIpcHandle(handle);
  if (h.exporter === processToken())
    throw usage('ERR_PENSTOCK_IPC_SAME_PROCESS', 'This handle was exported by this process, and CUDA cannot open a handle in its own process; use the exported DeviceBuffer (or a view of it) instead');
  requireIpc();
  const local = localOrdinal(h.pciBusId);
  let device: number;
  if (options.device === undefined) {
    if (local === undefined)
      throw usage('ERR_PENSTOCK_IPC_DEVICE_NOT_VISIBLE', `No GPU of this process has PCI bus id ${h.pciBusId} (the exporter's GPU ${h.device}); CUDA_VISIBLE_DEVICES may hide it. Pass { device, peerAccess: true } to map it through another GPU.`);
    device = local;
  } else {
    checkDevice(options.device);
    device = options.device;
    if (local !== device && !options.peerAccess)
      throw usage('ERR_PENSTOCK_IPC_WRONG_DEVICE', `The handle's memory is on the GPU at PCI bus id ${h.pciBusId}${local === undefined ? ', which this process cannot see' : ` (GPU ${local} here)`}, not GPU ${device}; pass peerAccess: true to map it through GPU ${device}`);
  }
  // Mapping needs only the GPU's primary context, which the open itself retains, and copies need
  // the pool's threads. The staging resources of file I/O (pinned bounce buffers, streams, the
  // cuFile driver) are made by the first such I/O, so a process that only maps does not pay for
  // them (docs/ipc.md).
  ensurePool();
  const base = call(() => native().ipcOpenMemHandle(device, handleBytes(h), LAZY_ENABLE_PEER_ACCESS));
  const mapped = (() => {
    try {
      return native().ipcPointerFacts(device, base).rangeSize;
    } catch {
      return undefined;
    }
  })();
  if (mapped !== undefined && mapped < h.offset + h.size) {
    call(() => native().ipcCloseMemHandle(device, base));
    throw usage('ERR_PENSTOCK_IPC_BAD_HANDLE', `The mapping spans ${mapped} bytes, fewer than the handle's view [${h.offset}, ${h.offset + h.size}) needs`);
  }
  return DeviceBuffer.fromIpcMapping(base, device, h.offset, h.size);
}

