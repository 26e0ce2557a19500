/**
 * The index of a sharded checkpoint (`model.safetensors.index.json`): `weight_map` from tensor
 * names to shard files, which are relative to the index's own directory.
 */
import path from 'node:path';
import { formatError } from './errors.js';
import { resolveInside } from '../sources/open-source.js';
import { isRemoteUrl, redactText } from '../sources/remote/url.js';
import { isJsonNumber, isJsonObject, parseStrictJson, StrictJsonError, type JsonValue } from './strict-json.js';

/** A parsed index. */
export interface ShardedIndex {
  /** The index's `metadata` (e.g. `total_size`), as found. */
  metadata: Record<string, unknown>;
  /** Tensor name → shard location (resolved against the index's directory). */
  weightMap: Map<string, string>;
  /** The shard locations, each once, in the order they first appear. */
  shards: string[];
}

/** Whether a location is a URL (`s3://…`, `https://…`) rather than a local path. */
export function isUrl(location: string): boolean {
  return /^[a-z][a-z0-9+.-]*:\/\//i.test(location);
}

/**
 * The most bytes an index may have. The indexes of the largest published checkpoints are a few
 * MiB (one line per tensor); a larger one is refused before it is read, not read whole.
 */
export const MAX_INDEX_BYTES = 64 * 1024 * 1024;

/**
 * Resolves a shard name against the index's location (a local path or a URL): the result lies in
 * the index's own folder (or below it), on the index's own origin or bucket, whatever the name's
 * spelling; otherwise ERR_PENSTOCK_TENSOR_INDEX_BAD_PATH.
 */
export function resolveShard(indexLocation: string, shard: string): string {
  const r = placeShard(indexLocation, shard);
  if ('why' in r) throw formatError('ERR_PENSTOCK_TENSOR_INDEX_BAD_PATH', r.why, { path: shownLocation(indexLocation) });
  return r.location;
}

function placeShard(indexLocation: string, shard: string): { location: string } | { why: string } {
  const outside = { why: `the shard ${JSON.stringify(shard)} is not a path inside the index's directory` };
  // Control characters (NUL among them) have no place in a file name an index gives.
  if (/[\x00-\x1f\x7f]/.test(shard)) return { why: `the shard name ${JSON.stringify(shard)} holds a control character` };
  if (path.isAbsolute(shard) || isUrl(shard) || shard.split(/[\\/]/).includes('..')) return outside;
  // A name with a scheme (`file:x`, `https:host/x`) would be read as an address of its own.
  if (isRemoteUrl(indexLocation) && /^[a-z][a-z0-9+.-]*:/i.test(shard)) return outside;
  // Beside a URL, `?` and `#` would start a query or fragment and name another file than the index does.
  if (/^https?:/i.test(indexLocation) && /[?#]/.test(shard)) return { why: `the shard name ${JSON.stringify(shard)} holds ? or #, which a URL takes for a query or fragment (write them %3F and %23)` };
  try {
    return { location: resolveInside(indexLocation, shard) };
  } catch {
    return outside;
  }
}

/** The index's location as messages show it: a URL without user info or query string. */
function shownLocation(indexLocation: string): string {
  return isRemoteUrl(indexLocation) ? redactText(indexLocation) : indexLocation;
}

/** Parses an index's text; shard names must stay inside the index's directory. */
export function parseShardedIndex(text: string, indexLocation: string): ShardedIndex {
  const where = { path: shownLocation(indexLocation) };
  let root: JsonValue;
  try {
    root = parseStrictJson(text);
  } catch (err) {
    const e = err as StrictJsonError;
    if (e.kind === 'duplicate' && e.depth === 2)
      throw formatError('ERR_PENSTOCK_TENSOR_DUPLICATE_NAME', `the tensor ${JSON.stringify(e.key)} is listed twice in the weight_map`, { ...where, tensor: e.key! });
    throw formatError('ERR_PENSTOCK_TENSOR_INDEX_INVALID', `the index is not valid JSON (${e.message})`, where);
  }
  if (!isJsonObject(root) || !isJsonObject(root.weight_map))
    throw formatError('ERR_PENSTOCK_TENSOR_INDEX_INVALID', 'the index has no weight_map object', where);
  const weightMap = new Map<string, string>();
  const shards: string[] = [];
  const seen = new Set<string>();
  for (const [name, file] of Object.entries(root.weight_map)) {
    if (typeof file !== 'string' || file.length === 0)
      throw formatError('ERR_PENSTOCK_TENSOR_INDEX_INVALID', `weight_map[${JSON.stringify(name)}] is not a file name`, { ...where, tensor: name });
    const placed = placeShard(indexLocation, file);
    if ('why' in placed) throw formatError('ERR_PENSTOCK_TENSOR_INDEX_BAD_PATH', placed.why, { ...where, tensor: name });
    const loc = placed.location;
    weightMap.set(name, loc);
    if (!seen.has(loc)) {
      seen.add(loc);
      shards.push(loc);
    }
  }
  const metadata = isJsonObject(root.metadata) ? plain(root.metadata) : {};
  return { metadata: metadata as Record<string, unknown>, weightMap, shards };
}

/** Converts a strict-JSON value into plain JS values (numbers as numbers). */
function plain(v: JsonValue): unknown {
  if (isJsonNumber(v)) return v.value;
  if (Array.isArray(v)) return v.map(plain);
  if (v !== null && typeof v === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) out[k] = plain(x);
    return out;
  }
  return v;
}
