/**
 * The CUDA IPC hand-off as plain data: the handle object another process needs to map a
 * DeviceBuffer, its JSON and base64 forms, strict parsing, and the error codes of the hand-off.
 */
import { usage } from '../vocabulary/errors.js';
import { describe } from '../vocabulary/validate.js';

/** Error codes of the CUDA IPC hand-off (src/ipc/handles.ts, src/ipc/manifest.ts), each with its meaning. */
export const IPC_ERROR_CODES = {
  ERR_PENSTOCK_IPC_UNSUPPORTED: 'The CUDA driver lacks the IPC entry points (cuIpcGetMemHandle, cuIpcOpenMemHandle_v2, cuIpcCloseMemHandle, cuDeviceGetByPCIBusId)',
  ERR_PENSTOCK_IPC_NOT_EXPORTABLE: 'The memory cannot be exported: wrapped or imported memory, an empty buffer, or an allocation CUDA IPC refuses (stream-ordered pools, VMM)',
  ERR_PENSTOCK_IPC_BAD_HANDLE: 'The handle is not a valid penstock IPC handle (malformed JSON or base64, unknown type or version, impossible numbers)',
  ERR_PENSTOCK_IPC_SAME_PROCESS: 'The handle was exported by this very process, where CUDA cannot open it; use the exported buffer itself',
  ERR_PENSTOCK_IPC_DEVICE_NOT_VISIBLE: "No GPU of this process has the handle's PCI bus id (CUDA_VISIBLE_DEVICES may hide it)",
  ERR_PENSTOCK_IPC_WRONG_DEVICE: "The GPU asked for is not the handle's GPU, and peer access was not asked for",
  ERR_PENSTOCK_IPC_BAD_MANIFEST: 'A tensor manifest or tensor record is malformed (names, dtypes, shapes, strides, offsets outside the slab)',
} as const;

/** The `type` every penstock IPC handle carries. */
export const IPC_HANDLE_TYPE = 'penstock.cuda-ipc';
/** The handle format version this release writes and reads. */
export const IPC_HANDLE_VERSION = 1;
/** Bytes in a CUDA IPC memory handle (CU_IPC_HANDLE_SIZE). */
export const CUDA_IPC_HANDLE_BYTES = 64;

/**
 * A DeviceBuffer exported through CUDA IPC, as plain JSON-safe data. The CUDA handle names the
 * whole allocation; `offset` and `size` say which bytes of it the exported view covers.
 */
export interface IpcHandle {
  /** Always `penstock.cuda-ipc`: marks the object as a penstock IPC handle. */
  type: typeof IPC_HANDLE_TYPE;
  /** The handle format version (1); other versions are refused. */
  version: typeof IPC_HANDLE_VERSION;
  /** The 64-byte CUipcMemHandle of the allocation, base64. */
  handle: string;
  /** Byte offset of the view from the start of the allocation. */
  offset: number;
  /** Bytes in the view. */
  size: number;
  /** Bytes in the whole allocation (what a mapping of the handle spans). */
  allocationSize: number;
  /** The exporter's GPU ordinal (ordinals differ between processes: match by `pciBusId`). */
  device: number;
  /** The GPU's PCI bus id, as cuDeviceGetPCIBusId gives it (e.g. "0000:18:00.0"). */
  pciBusId: string;
  /** The exporting process. */
  pid: number;
  /** A random id of the exporting process, so the exporter recognises its own handles. */
  exporter: string;
}

function bad(message: string): never {
  throw usage('ERR_PENSTOCK_IPC_BAD_HANDLE', message);
}

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;
const BASE64URL = /^[A-Za-z0-9_-]*={0,2}$/;
const PCI_BUS_ID = /^([0-9a-fA-F]{1,8}:)?[0-9a-fA-F]{1,2}:[0-9a-fA-F]{1,2}(\.[0-7])?$/;

function integerField(o: Record<string, unknown>, key: string, min: number): number {
  const v = o[key];
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min)
    bad(`IPC handle field "${key}" must be an integer of at least ${min}, got ${describe(v)}`);
  return v;
}

/** The 64 CUDA handle bytes of a handle (already validated by {@link parseIpcHandle}). */
export function handleBytes(h: IpcHandle): Buffer {
  return Buffer.from(h.handle, 'base64');
}

/**
 * Checks and returns an IPC handle given as an object, its JSON text, or its
 * {@link encodeIpcHandle} base64 form. Anything else is `ERR_PENSTOCK_IPC_BAD_HANDLE`.
 */
export function parseIpcHandle(input: unknown): IpcHandle {
  let value = input;
  if (typeof value === 'string') {
    const text = value.trim();
    let json = text;
    if (!text.startsWith('{')) {
      if (!BASE64URL.test(text) && !BASE64.test(text)) bad('An IPC handle string must be JSON or base64 of JSON');
      json = Buffer.from(text, 'base64url').toString('utf8');
    }
    try {
      value = JSON.parse(json);
    } catch (err) {
      bad(`The IPC handle is not valid JSON: ${(err as Error).message}`);
    }
  }
  if (!value || typeof value !== 'object' || Array.isArray(value)) bad(`An IPC handle must be an object, got ${describe(value)}`);
  const o = value as Record<string, unknown>;
  if (o.type !== IPC_HANDLE_TYPE) bad(`Not a penstock IPC handle (type ${describe(o.type)}, expected "${IPC_HANDLE_TYPE}")`);
  if (o.version !== IPC_HANDLE_VERSION)
    bad(`IPC handle version ${describe(o.version)} is not understood by this release (it reads version ${IPC_HANDLE_VERSION})`);
  if (typeof o.handle !== 'string' || !BASE64.test(o.handle) || Buffer.from(o.handle, 'base64').length !== CUDA_IPC_HANDLE_BYTES)
    bad(`IPC handle field "handle" must be base64 of ${CUDA_IPC_HANDLE_BYTES} bytes`);
  const offset = integerField(o, 'offset', 0);
  const size = integerField(o, 'size', 0);
  const allocationSize = integerField(o, 'allocationSize', 1);
  if (offset > allocationSize || size > allocationSize - offset)
    bad(`The view [${offset}, ${offset + size}) lies outside the allocation of ${allocationSize} bytes`);
  const device = integerField(o, 'device', 0);
  const pid = integerField(o, 'pid', 1);
  if (typeof o.pciBusId !== 'string' || !PCI_BUS_ID.test(o.pciBusId))
    bad(`IPC handle field "pciBusId" must be a PCI bus id such as "0000:18:00.0", got ${describe(o.pciBusId)}`);
  if (typeof o.exporter !== 'string' || !/^[0-9a-f]{32}$/.test(o.exporter))
    bad(`IPC handle field "exporter" must be 32 hexadecimal digits, got ${describe(o.exporter)}`);
  return {
    type: IPC_HANDLE_TYPE,
    version: IPC_HANDLE_VERSION,
    handle: o.handle,
    offset,
    size,
    allocationSize,
    device,
    pciBusId: o.pciBusId,
    pid,
    exporter: o.exporter,
  };
}

/** A handle as one base64url string (of its JSON), for command lines and environment variables. */
export function encodeIpcHandle(h: IpcHandle): string {
  return Buffer.from(JSON.stringify(parseIpcHandle(h)), 'utf8').toString('base64url');
}
