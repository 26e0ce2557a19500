/**
 * The addon's scan of safetensors headers against the strict reader: the plain form writers
 * produce is scanned, every other header is declined (and read strictly), and for any header,
 * valid or not, the two give the same tensors, metadata and order, or the same error.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { native } from '../../src/addon/binding.js';
import { parseSafetensorsHeader, parseSafetensorsHeaderStrictly } from '../../src/formats/safetensors.js';

const scan = (text: string | Buffer) => native().scanSafetensorsHeader(typeof text === 'string' ? Buffer.from(text) : text);

/** The outcome of a reader: its header, or its error's code and message. */
function outcome(read: () => unknown): unknown {
  try {
    return { ok: read() };
  } catch (err) {
    return { code: (err as { code?: string }).code, message: (err as Error).message };
  }
}

/** Both readers agree on `bytes`, given a file with `data` bytes after the header. */
function assertAgree(bytes: Buffer, data: number, what: string): void {
  const size = 8 + bytes.length + data;
  assert.deepEqual(outcome(() => parseSafetensorsHeader(bytes, size, 'f')), outcome(() => parseSafetensorsHeaderStrictly(bytes, size, 'f')), what);
}

const entry = (dtype: string, shape: number[], begin: number, end: number) => ({ dtype, shape, data_offsets: [begin, end] });

/** A header of `n` BF16 tensors of 256 × 1024, written in name order with data in reverse. */
function manyTensors(n: number): string {
  const h: Record<string, unknown> = { __metadata__: { format: 'pt' } };
  const size = 256 * 1024 * 2;
  for (let i = 0; i < n; i++) h[`model.layers.${i >> 7}.mlp.experts.${i & 127}.up_proj.weight`] = entry('BF16', [256, 1024], (n - 1 - i) * size, (n - i) * size);
  return JSON.stringify(h);
}

const PLAIN: { name: string; text: string; data: number }[] = [
  { name: 'one tensor', text: '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}', data: 8 },
  { name: 'no tensors', text: '{}', data: 0 },
  { name: 'only metadata, padded', text: '{"__metadata__": {"k": "v"}}   ', data: 0 },
  { name: 'metadata with escapes and unicode', text: JSON.stringify({ __metadata__: { note: 'a "quoted"\nline é 😀', x: '{"nested": [1]}' }, w: entry('U8', [3], 0, 3) }), data: 3 },
  { name: 'pretty-printed', text: JSON.stringify({ b: entry('I64', [7], 0, 56), w: entry('F16', [3, 5], 56, 86) }, null, 2) + '\n  ', data: 86 },
  { name: 'keys in another order, a scalar and an empty tensor', text: '{"s":{"shape":[],"data_offsets":[0,8],"dtype":"F64"},"e":{"data_offsets":[8,8],"dtype":"F32","shape":[0,4]}}', data: 8 },
  { name: 'non-ASCII names', text: JSON.stringify({ 'poids.é': entry('U8', [1], 0, 1), '重み': entry('U8', [1], 1, 2) }), data: 2 },
  { name: '__proto__ and constructor', text: JSON.stringify({ ['__proto__']: entry('U8', [1], 0, 1), constructor: entry('U8', [1], 1, 2) }), data: 2 },
  { name: 'empty tensors at one offset keep header order', text: JSON.stringify({ z: entry('F32', [0], 4, 4), a: entry('F32', [0], 4, 4), m: entry('F32', [1], 0, 4) }), data: 4 },
  { name: '15 digits', text: JSON.stringify({ a: entry('U8', [0, 999_999_999_999_999], 0, 0) }), data: 0 },
  { name: '15 000 tensors', text: manyTensors(15_000), data: 15_000 * 256 * 1024 * 2 },
  { name: 'names longer than the strings the scan joins them into', text: JSON.stringify({ a: entry('U8', [1], 0, 1), ['n'.repeat(70_000)]: entry('U8', [1], 1, 2), ['m'.repeat(65_535)]: entry('U8', [1], 2, 3), b: entry('U8', [1], 3, 4) }), data: 4 },
];

const DECLINED: { name: string; text: string | Buffer }[] = [
  { name: 'an escape in a name', text: '{"a\\u0062":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}' },
  { name: 'an escape in a dtype', text: '{"a":{"dtype":"F\\u0033\\u0032","shape":[2],"data_offsets":[0,8]}}' },
  { name: 'a name of digits (JavaScript orders it first)', text: '{"b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"10":{"dtype":"F32","shape":[0],"data_offsets":[8,8]}}' },
  { name: 'a fraction', text: '{"a":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}}' },
  { name: 'a negative number', text: '{"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}}' },
  { name: 'an exponent', text: '{"a":{"dtype":"F32","shape":[2e0],"data_offsets":[0,8]}}' },
  { name: 'a leading zero', text: '{"a":{"dtype":"F32","shape":[02],"data_offsets":[0,8]}}' },
  { name: '16 digits', text: '{"a":{"dtype":"F32","shape":[1000000000000000],"data_offsets":[0,8]}}' },
  { name: 'another key in an entry', text: '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}}' },
  { name: 'a field twice', text: '{"a":{"dtype":"F32","dtype":"F32","shape":[2],"data_offsets":[0,8]}}' },
  { name: 'a missing field', text: '{"a":{"dtype":"F32","shape":[2]}}' },
  { name: 'three offsets', text: '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8,9]}}' },
  { name: 'a duplicate name', text: '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}' },
  { name: 'metadata twice', text: '{"__metadata__":{},"__metadata__":{}}' },
  { name: 'a leading space', text: ' {}' },
  { name: 'a byte-order mark', text: Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{}')]) },
  { name: 'NUL padding', text: Buffer.concat([Buffer.from('{}'), Buffer.alloc(3)]) },
  { name: 'text after the object', text: '{} x' },
  { name: 'invalid UTF-8 in metadata', text: Buffer.concat([Buffer.from('{"__metadata__":{"k":"'), Buffer.from([0xc3, 0x28]), Buffer.from('"}}')]) },
  { name: 'an overlong encoding', text: Buffer.concat([Buffer.from('{"'), Buffer.from([0xc0, 0xaf]), Buffer.from('":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}')]) },
  { name: 'a surrogate encoded', text: Buffer.concat([Buffer.from('{"'), Buffer.from([0xed, 0xa0, 0x80]), Buffer.from('":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}')]) },
  { name: 'a control character in a name', text: '{"a\tb":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}' },
  { name: 'unterminated', text: '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}' },
];

describe('the header scan', () => {
  for (const c of PLAIN)
    test(`scans ${c.name}, as the strict reader reads it`, () => {
      const s = scan(c.text);
      assert.ok(s, 'scanned');
      const bytes = Buffer.from(c.text);
      const fast = parseSafetensorsHeader(bytes, 8 + bytes.length + c.data);
      assert.deepEqual(fast, parseSafetensorsHeaderStrictly(bytes, 8 + bytes.length + c.data));
      assert.equal(s.count, fast.tensors.length);
    });

  for (const c of DECLINED)
    test(`declines ${c.name}; both readers still agree`, () => {
      assert.equal(scan(c.text), null);
      assertAgree(Buffer.isBuffer(c.text) ? c.text : Buffer.from(c.text), 16, c.name);
    });

  test('plain headers whose content is wrong get the strict reader\'s error', () => {
    const bad = [
      '{"a":{"dtype":"F12","shape":[2],"data_offsets":[0,8]}}',
      '{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}',
      '{"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}}',
      '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}',
      '{"":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}',
      '{"a":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}}',
      '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"__metadata__":{"k":1}}',
      '{"__metadata__":{"k":"v","k":"w"}}',
      '{"a":{"dtype":"U8","shape":[1073741824,1073741824,1073741824],"data_offsets":[0,8]}}',
    ];
    for (const text of bad) {
      assert.ok(scan(text), text);
      const got = outcome(() => parseSafetensorsHeader(Buffer.from(text), 8 + text.length + 8));
      assert.ok((got as { code?: string }).code, `${text} is refused`);
      assertAgree(Buffer.from(text), 8, text);
    }
  });

  test('random mutations of a plain header: both readers agree on every one', () => {
    const base = Buffer.from(JSON.stringify({ __metadata__: { format: 'pt' }, a: entry('BF16', [2, 3], 0, 12), b: entry('F4', [4], 12, 14), c: entry('F32', [], 14, 18) }));
    let seed = 4242;
    const rnd = () => (seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32;
    let scanned = 0;
    for (let i = 0; i < 4000; i++) {
      const m = Buffer.from(base);
      const edits = 1 + Math.floor(rnd() * 3);
      for (let e = 0; e < edits; e++) m[Math.floor(rnd() * m.length)] = rnd() < 0.5 ? Math.floor(rnd() * 256) : base[Math.floor(rnd() * base.length)]!;
      const cut = rnd() < 0.1 ? m.subarray(0, Math.floor(rnd() * m.length)) : m;
      if (scan(cut)) scanned++;
      assertAgree(cut, 18, JSON.stringify(cut.toString('latin1')));
    }
    assert.ok(scanned > 100, `${scanned} mutations were scanned`);
  });
});
