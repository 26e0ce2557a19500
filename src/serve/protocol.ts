/**
 * The wire format between `penstock serve` and its clients: one JSON object per line (UTF-8,
 * `\n`-terminated), every message carrying the protocol version `v`. A client sends requests
 * `{ v, id, op, ... }`; the daemon answers each with `{ v, id, ok: true, ... }` or
 * `{ v, id, ok: false, error: { code, message } }`. Plain data only: checks here, sockets elsewhere.
 */
import { usage } from '../vocabulary/errors.js';
import { describe } from '../vocabulary/validate.js';
import type { RowShard } from '../tensors/load-plan.js';

/** Error codes of `penstock serve` and its clients, each with its meaning. */
export const SERVE_ERROR_CODES = {
  ERR_PENSTOCK_SERVE_BAD_REQUEST: 'A request to the daemon is malformed: not JSON, not an object, an unknown op, a bad field, or a line over the size limit',
  ERR_PENSTOCK_SERVE_VERSION: 'The message speaks a protocol version this side does not understand',
  ERR_PENSTOCK_SERVE_UNKNOWN_LEASE: 'No lease of this connection has that id (never granted, or already released)',
  ERR_PENSTOCK_SERVE_UNKNOWN_SET: 'The daemon holds no tensor set with that key',
  ERR_PENSTOCK_SERVE_LEASED: 'The tensor set has live leases, so it cannot be evicted',
  ERR_PENSTOCK_SERVE_TOO_LARGE: "The tensor set is larger than the daemon's memory budget for its GPU",
  ERR_PENSTOCK_SERVE_BUDGET_FULL: "Leased tensor sets fill the daemon's budget, so the set cannot be loaded until some are released",
  ERR_PENSTOCK_SERVE_PEER_REFUSED: "The connecting process runs as a user the daemon does not serve",
  ERR_PENSTOCK_SERVE_IN_USE: 'Another daemon already serves that socket path, or a file that is not a socket is there',
  ERR_PENSTOCK_SERVE_UNSAFE_DIR: "The socket's directory is not the user's own, or other users could write to (or, by default, enter) it",
  ERR_PENSTOCK_SERVE_CLOSED: 'The connection to the daemon closed before the answer came (the daemon stopped, or refused this client)',
} as const;

/** The protocol version this release speaks. */
export const SERVE_PROTOCOL_VERSION = 1;
/** The longest request line the daemon reads (bytes, newline excluded). */
export const MAX_REQUEST_BYTES = 1 << 20;
/** The longest answer line a client reads (manifests of large checkpoints are long). */
export const MAX_ANSWER_BYTES = 256 << 20;

/** The requests a client may send. */
export const SERVE_OPS = ['acquire', 'release', 'list', 'evict', 'stats', 'health'] as const;
/** One of {@link SERVE_OPS}. */
export type ServeOp = (typeof SERVE_OPS)[number];

/**
 * A tensor set as a client names it: what `loadTensors` would load, and on which GPU. Two
 * requests name the same resident set exactly when their normalised specs are equal.
 */
export interface SetSpec {
  /** Absolute file paths (a `.safetensors`, an `index.json`, `.npy` files) or `s3://`, `http(s)://` URLs. */
  path: string | string[];
  /** GPU ordinal in the daemon's process (default 0). */
  device?: number;
  /** Only these tensors (each must exist), or those whose names start with `prefix`. */
  filter?: string[] | { prefix: string };
  /** Tensor-parallel shard: only this shard's rows of every 2-D tensor. */
  rows?: RowShard;
}

/** A {@link SetSpec} with every choice made: paths in a list, names sorted, the device given. */
export interface NormalSpec {
  /** The paths or URLs, in the order given. */
  path: string[];
  /** GPU ordinal in the daemon. */
  device: number;
  /** Sorted, unique names, or a prefix; absent for the whole checkpoint. */
  filter?: string[] | { prefix: string };
  /** The row shard, when one was asked for. */
  rows?: RowShard;
}

/** A request, checked. */
export type ServeRequest =
  | { id: number; op: 'acquire'; set: NormalSpec }
  | { id: number; op: 'release'; lease: string }
  | { id: number; op: 'evict'; key?: string; all?: boolean }
  | { id: number; op: 'list' | 'stats' | 'health' };

function bad(message: string): never {
  throw usage('ERR_PENSTOCK_SERVE_BAD_REQUEST', message);
}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

function ordinal(v: unknown, what: string): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0 || v > 1 << 16) bad(`${what} must be a non-negative integer, got ${describe(v)}`);
  return v;
}

const isUrl = (s: string) => /^(s3|https?):\/\//i.test(s);

/**
 * Checks and normalises a set spec. Local paths must be absolute (the daemon's working folder is
 * not the client's); each is kept as given, so two spellings of one file are two sets.
 */
export function normalizeSpec(value: unknown): NormalSpec {
  if (!isObject(value)) bad(`"set" must be an object, got ${describe(value)}`);
  for (const k of Object.keys(value)) if (!['path', 'device', 'filter', 'rows'].includes(k)) bad(`"set" has an unknown field "${k}"`);
  const raw = typeof value.path === 'string' ? [value.path] : value.path;
  if (!Array.isArray(raw) || raw.length === 0 || raw.length > 100_000) bad(`"set.path" must be a path or a non-empty list of paths, got ${describe(value.path)}`);
  const path = raw.map((p) => {
    if (typeof p !== 'string' || p.length === 0 || p.length > 4096 || p.includes('\0')) bad(`"set.path" entries must be non-empty strings, got ${describe(p)}`);
    if (!isUrl(p) && !p.startsWith('/')) bad(`"set.path" must be absolute paths or s3://, http(s):// URLs, got "${p}"`);
    return p;
  });
  const out: NormalSpec = { path, device: value.device === undefined ? 0 : ordinal(value.device, '"set.device"') };
  const f = value.filter;
  if (Array.isArray(f)) {
    if (f.length === 0 || !f.every((n) => typeof n === 'string' && n.length > 0)) bad('"set.filter" must be a non-empty list of tensor names, or { prefix }');
    out.filter = [...new Set(f as string[])].sort();
  } else if (isObject(f)) {
    if (Object.keys(f).length !== 1 || typeof f.prefix !== 'string') bad('"set.filter" must be a list of tensor names, or { prefix: string }');
    out.filter = { prefix: f.prefix };
  } else if (f !== undefined) bad(`"set.filter" must be a list of tensor names, or { prefix }, got ${describe(f)}`);
  const r = value.rows;
  if (r !== undefined) {
    if (!isObject(r) || Object.keys(r).length !== 2) bad('"set.rows" must be { index, count }');
    const count = ordinal(r.count, '"set.rows.count"');
    const index = ordinal(r.index, '"set.rows.index"');
    if (count < 1 || index >= count) bad(`"set.rows" must have 0 <= index < count, got ${index}/${count}`);
    out.rows = { index, count };
  }
  return out;
}

/** The key a normalised spec is held under: its canonical JSON. */
export function specKey(spec: NormalSpec): string {
  return JSON.stringify({ path: spec.path, device: spec.device, filter: spec.filter ?? null, rows: spec.rows ?? null });
}

/** Parses one request line. Throws ERR_PENSTOCK_SERVE_BAD_REQUEST or _VERSION; `id` is recovered when it can be. */
export function parseRequest(line: string): ServeRequest {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    bad('The request is not valid JSON');
  }
  if (!isObject(value)) bad(`A request must be a JSON object, got ${describe(value)}`);
  if (value.v !== SERVE_PROTOCOL_VERSION)
    throw usage('ERR_PENSTOCK_SERVE_VERSION', `Protocol version ${describe(value.v)} is not understood (this daemon speaks ${SERVE_PROTOCOL_VERSION})`);
  const id = value.id;
  if (typeof id !== 'number' || !Number.isSafeInteger(id) || id < 0) bad(`"id" must be a non-negative integer, got ${describe(id)}`);
  const op = value.op;
  if (typeof op !== 'string' || !(SERVE_OPS as readonly string[]).includes(op)) bad(`Unknown op ${describe(op)} (one of ${SERVE_OPS.join(', ')})`);
  switch (op as ServeOp) {
    case 'acquire':
      return { id, op: 'acquire', set: normalizeSpec(value.set) };
    case 'release':
      if (typeof value.lease !== 'string' || !/^[0-9a-f]{32}$/.test(value.lease)) bad(`"lease" must be a lease id, got ${describe(value.lease)}`);
      return { id, op: 'release', lease: value.lease };
    case 'evict': {
      if (value.all === true) return { id, op: 'evict', all: true };
      if (typeof value.key !== 'string') bad('evict needs "key" (a set\'s key) or "all": true');
      return { id, op: 'evict', key: value.key };
    }
    default:
      return { id, op: op as 'list' | 'stats' | 'health' };
  }
}

/** The `id` of a request line that failed to parse, when one can be read (else null). */
export function requestIdOf(line: string): number | null {
  try {
    const v = JSON.parse(line) as unknown;
    if (isObject(v) && typeof v.id === 'number' && Number.isSafeInteger(v.id) && v.id >= 0) return v.id;
  } catch {
    // not JSON: no id
  }
  return null;
}

/** A successful answer line. */
export function answerLine(id: number | null, body: Record<string, unknown>): string {
  return `${JSON.stringify({ v: SERVE_PROTOCOL_VERSION, id, ok: true, ...body })}\n`;
}

/** An error answer line; `code` is the error's code (a penstock code, an errno name, a CUDA name). */
export function errorLine(id: number | null, err: unknown): string {
  const e = err as { code?: unknown; message?: unknown };
  const code = typeof e?.code === 'string' ? e.code : 'ERR_PENSTOCK_INTERNAL';
  const message = typeof e?.message === 'string' ? e.message : String(err);
  return `${JSON.stringify({ v: SERVE_PROTOCOL_VERSION, id, ok: false, error: { code, message } })}\n`;
}
