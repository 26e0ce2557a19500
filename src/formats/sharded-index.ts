/**
 * The index of a sharded checkpoint (`model.safetensors.index.json`): `weight_map` from tensor
 * names to shard files, which are relative to the index's own directory.
 */
import path from 'node:path';
import { formatError } from './errors.js';
import { resolveBeside } from '../sources/open-source.js';
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

/** Resolves a shard name against the index's location (a local path or a URL). */
export function resolveShard(indexLocation: string, shard: string): string {
  return resolveBeside(indexLocation, shard);
}

/** Parses an index's text; shard names must stay inside the index's directory. */
export function parseShardedIndex(text: string, indexLocation: string): ShardedIndex {
  const where = { path: indexLocation };
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
    if (path.isAbsolute(file) || isUrl(file) || file.split(/[\\/]/).includes('..'))
      throw formatError('ERR_PENSTOCK_TENSOR_INDEX_BAD_PATH', `the shard ${JSON.stringify(file)} is not a path inside the index's directory`, { ...where, tensor: name });
    const loc = resolveShard(indexLocation, file);
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
