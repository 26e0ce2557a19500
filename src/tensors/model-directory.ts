/**
 * A model directory (what `save_pretrained` writes, what a hub download leaves) given where a
 * checkpoint is expected: the directory stands for the checkpoint in it, found the way
 * `from_pretrained` finds it. Its sharded index if it has one; else its `model.safetensors`;
 * else every `*.safetensors` file in it, in name order. A directory with none of these is a
 * typed error naming what was looked for.
 */
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { formatError } from '../formats/errors.js';
import { isUrl } from '../formats/sharded-index.js';

const statAsync = promisify(fs.stat);
const readdirAsync = promisify(fs.readdir);

/** The index a sharded checkpoint's directory holds (the name `save_pretrained` gives it). */
export const MODEL_INDEX_NAME = 'model.safetensors.index.json';
/** The single-file checkpoint of a model directory. */
export const MODEL_FILE_NAME = 'model.safetensors';

/**
 * What a local directory holds as a checkpoint: its index, its `model.safetensors`, or its
 * safetensors files (sorted by name). Another index name (`diffusion_pytorch_model.safetensors.index.json`)
 * is taken when it is the only one. Throws `ERR_PENSTOCK_TENSOR_NO_CHECKPOINT` when there is none.
 */
export async function checkpointInDirectory(dir: string): Promise<string[]> {
  let names: string[];
  try {
    names = (await readdirAsync(dir, { withFileTypes: true })).filter((e) => !e.isDirectory()).map((e) => e.name);
  } catch {
    // Unreadable: left to the open, whose error names the OS's reason.
    return [dir];
  }
  const has = new Set(names);
  if (has.has(MODEL_INDEX_NAME)) return [path.join(dir, MODEL_INDEX_NAME)];
  const indexes = names.filter((n) => n.endsWith('.safetensors.index.json'));
  if (indexes.length === 1) return [path.join(dir, indexes[0]!)];
  if (indexes.length > 1)
    throw formatError('ERR_PENSTOCK_TENSOR_NO_CHECKPOINT', `the directory holds several indexes (${indexes.sort().join(', ')}) and no ${MODEL_INDEX_NAME}: name the index to load`, { path: dir });
  if (has.has(MODEL_FILE_NAME)) return [path.join(dir, MODEL_FILE_NAME)];
  // Code-point order, the same on every machine and locale.
  const files = names.filter((n) => n.endsWith('.safetensors')).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  if (files.length === 0)
    throw formatError('ERR_PENSTOCK_TENSOR_NO_CHECKPOINT', `the directory holds no checkpoint: no ${MODEL_INDEX_NAME}, no ${MODEL_FILE_NAME} and no other *.safetensors file`, { path: dir });
  return files.map((n) => path.join(dir, n));
}

/**
 * Replaces every local path of `items` that names a directory by the checkpoint in it. URLs and
 * paths that are not directories (or do not exist) stay as they are, for the opener to judge.
 */
export async function expandDirectories<T>(items: readonly (string | T)[]): Promise<(string | T)[]> {
  const out: (string | T)[] = [];
  for (const item of items) {
    if (typeof item !== 'string' || isUrl(item)) {
      out.push(item);
      continue;
    }
    const st = await statAsync(item).catch(() => undefined);
    if (st?.isDirectory()) out.push(...(await checkpointInDirectory(item)));
    else out.push(item);
  }
  return out;
}
