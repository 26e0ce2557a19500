/** Byte counts written for people: `4MiB`, `16k`, `1GB` in, `4 MiB` out. */
import { usage } from '../vocabulary/errors.js';

const UNITS: Record<string, number> = {
  '': 1, b: 1, k: 1024, kb: 1000, kib: 1024, m: 1024 ** 2, mb: 1000 ** 2, mib: 1024 ** 2,
  g: 1024 ** 3, gb: 1000 ** 3, gib: 1024 ** 3, t: 1024 ** 4, tb: 1000 ** 4, tib: 1024 ** 4,
};

/**
 * Parses `4MiB`, `16k`, `1GB`, `4096` into bytes (k, m, g, t and KiB… are powers of 1024; KB… of
 * 1000). Throws `ERR_PENSTOCK_INVALID_ARGUMENT` for anything else.
 */
export function parseSize(text: string | number): number {
  if (typeof text === 'number') return text;
  const m = /^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$/.exec(text);
  const unit = m ? UNITS[m[2]!.toLowerCase()] : undefined;
  if (!m || unit === undefined) throw usage('ERR_PENSTOCK_INVALID_ARGUMENT', `Not a size: '${text}' (try 4MiB, 64KiB, 1GiB)`);
  return Math.round(Number(m[1]) * unit);
}

/** Formats bytes with a binary unit: `4 MiB`. */
export function formatSize(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = bytes;
  let i = 0;
  while (v >= 1024 && i < units.length - 1 && Number.isInteger(v / 1024)) {
    v /= 1024;
    i++;
  }
  if (i === 0 && bytes >= 1024) {
    while (v >= 1024 && i < units.length - 1) {
      v /= 1024;
      i++;
    }
    return `${v.toFixed(1)} ${units[i]}`;
  }
  return `${v} ${units[i]}`;
}

