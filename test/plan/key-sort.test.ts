import assert from 'node:assert/strict';
import { test } from 'node:test';
import { sortByKeys } from '../../src/plan/key-sort.js';

/** The order a comparator sort gives (stable, most significant key first). */
function expected(n: number, keys: ArrayLike<number>[]): number[] {
  return Array.from({ length: n }, (_, i) => i).sort((a, b) => {
    for (const k of keys) if (k[a] !== k[b]) return k[a]! - k[b]!;
    return a - b;
  });
}

test('sortByKeys orders by every key, most significant first, and keeps ties in order', () => {
  let x = 7;
  const rand = (m: number) => ((x = (Math.imul(x, 1103515245) + 12345) >>> 0), x % m);
  for (const n of [0, 1, 2, 3, 50, 5000]) {
    const file = Uint32Array.from({ length: n }, () => rand(3));
    // Offsets past 2^32 and up to 2^53 - 1, page multiples and not.
    const offset = Float64Array.from({ length: n }, (_, i) => (i % 3 === 0 ? rand(1 << 20) * 4096 : i % 3 === 1 ? rand(1 << 30) * 2 ** 22 + rand(4096) : Number.MAX_SAFE_INTEGER - rand(8)));
    const keys = [file, offset];
    const ids = Uint32Array.from({ length: n }, (_, i) => i);
    assert.deepEqual([...sortByKeys(ids, keys)], expected(n, keys), `n=${n}`);
  }
});

test('sortByKeys: all keys equal leaves the order as given; sorted input stays sorted', () => {
  const n = 300;
  const same = new Float64Array(n).fill(123456789);
  const ids = Uint32Array.from({ length: n }, (_, i) => n - 1 - i);
  assert.deepEqual([...sortByKeys(ids.slice(), [same])], [...ids]);
  const rising = Float64Array.from({ length: n }, (_, i) => i * 4096);
  const order = Uint32Array.from({ length: n }, (_, i) => i);
  assert.deepEqual([...sortByKeys(order.slice().reverse(), [rising])], [...order]);
});
