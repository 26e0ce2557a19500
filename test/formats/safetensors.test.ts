/**
 * The safetensors header parser: every malformed header rejected with its own code before any
 * data moves, fuzzed headers never crash, and the odd but valid layouts real files have.
 */
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { loadTensors, open, type Source } from '../../src/index.js';
import { describeCheckpoint, parseSafetensorsHeader } from '../../src/formats.js';
import { TENSOR_ERROR_CODES } from '../../src/formats/errors.js';
import { tmpDir } from '../helpers.js';
import { writeRawSafetensors, writeSafetensors } from '../tensor-writer.js';

let n = 0;
const file = (name = 'h') => path.join(tmpDir(), `${name}-${++n}.safetensors`);

/** Opens files through a wrapper that records every read, to show no data was read. */
function recordingOpener(reads: { offset: number; size: number }[]) {
  return async (p: string): Promise<Source> => {
    const f = await open(p, 'r');
    return {
      path: f.path,
      size: () => f.size(),
      close: () => f.close(),
      read: (target, o) => {
        reads.push({ offset: o.fileOffset ?? 0, size: o.size ?? 0 });
        return f.read(target, o);
      },
    };
  };
}

const t = (o: Record<string, unknown>) => JSON.stringify(o);
const ok = { dtype: 'F32', shape: [2], data_offsets: [0, 8] };

/** Each malformed header, the data bytes after it, and the code it must be rejected with. */
const CASES: { name: string; header: string | Buffer; data?: number; length?: bigint; code: string }[] = [
  { name: 'file shorter than 8 bytes', header: Buffer.alloc(0), length: undefined, code: 'ERR_PENSTOCK_TENSOR_FILE_TOO_SMALL' },
  { name: 'header length past the file', header: t({ a: ok }), data: 8, length: 10_000n, code: 'ERR_PENSTOCK_TENSOR_HEADER_PAST_FILE' },
  { name: 'absurd header length', header: t({ a: ok }), data: 8, length: 0xffff_ffff_ffff_ffffn, code: 'ERR_PENSTOCK_TENSOR_HEADER_TOO_LARGE' },
  { name: 'header length 1', header: '{', length: 1n, data: 8, code: 'ERR_PENSTOCK_TENSOR_HEADER_TOO_SHORT' },
  { name: 'invalid UTF-8', header: Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x3a, 0x31, 0x7d]), code: 'ERR_PENSTOCK_TENSOR_HEADER_NOT_UTF8' },
  { name: 'invalid JSON', header: '{"a": {"dtype": "F32",', data: 8, code: 'ERR_PENSTOCK_TENSOR_HEADER_NOT_JSON' },
  { name: 'nesting too deep', header: '{"a":' + '['.repeat(500) + ']'.repeat(500) + '}', code: 'ERR_PENSTOCK_TENSOR_HEADER_TOO_DEEP' },
  { name: 'top level is an array', header: '[1, 2, 3]', code: 'ERR_PENSTOCK_TENSOR_HEADER_NOT_OBJECT' },
  { name: 'padded with NUL bytes', header: Buffer.concat([Buffer.from(t({ a: ok })), Buffer.alloc(6)]), data: 8, code: 'ERR_PENSTOCK_TENSOR_HEADER_BAD_PADDING' },
  { name: 'duplicate tensor name', header: `{"a": ${t(ok)}, "a": ${t(ok)}}`, data: 8, code: 'ERR_PENSTOCK_TENSOR_DUPLICATE_NAME' },
  { name: 'empty tensor name', header: t({ '': ok }), data: 8, code: 'ERR_PENSTOCK_TENSOR_EMPTY_NAME' },
  { name: '__metadata__ with a number', header: t({ __metadata__: { a: 1 }, a: ok }), data: 8, code: 'ERR_PENSTOCK_TENSOR_BAD_METADATA' },
  { name: 'entry is not an object', header: t({ a: [1, 2] }), code: 'ERR_PENSTOCK_TENSOR_ENTRY_NOT_OBJECT' },
  { name: 'missing data_offsets', header: t({ a: { dtype: 'F32', shape: [2] } }), data: 8, code: 'ERR_PENSTOCK_TENSOR_MISSING_FIELD' },
  { name: 'unknown dtype', header: t({ a: { ...ok, dtype: 'F12' } }), data: 8, code: 'ERR_PENSTOCK_TENSOR_UNKNOWN_DTYPE' },
  { name: 'inherited name as dtype', header: t({ a: { ...ok, dtype: 'constructor' } }), data: 8, code: 'ERR_PENSTOCK_TENSOR_UNKNOWN_DTYPE' },
  { name: 'negative dimension', header: t({ a: { ...ok, shape: [-2] } }), data: 8, code: 'ERR_PENSTOCK_TENSOR_BAD_SHAPE' },
  { name: 'fractional dimension', header: t({ a: { ...ok, shape: [2.5] } }), data: 8, code: 'ERR_PENSTOCK_TENSOR_BAD_SHAPE' },
  { name: 'shape not an array', header: t({ a: { ...ok, shape: '2' } }), data: 8, code: 'ERR_PENSTOCK_TENSOR_BAD_SHAPE' },
  { name: 'element count overflows', header: t({ a: { ...ok, shape: [1 << 30, 1 << 30, 1 << 30] } }), data: 8, code: 'ERR_PENSTOCK_TENSOR_SHAPE_OVERFLOW' },
  { name: 'F4 with an odd count', header: t({ a: { dtype: 'F4', shape: [3], data_offsets: [0, 2] } }), data: 2, code: 'ERR_PENSTOCK_TENSOR_SUB_BYTE_PACKING' },
  { name: 'F6 with a count not a multiple of 4', header: t({ a: { dtype: 'F6_E2M3', shape: [2], data_offsets: [0, 2] } }), data: 2, code: 'ERR_PENSTOCK_TENSOR_SUB_BYTE_PACKING' },
  { name: 'offsets not a pair', header: t({ a: { ...ok, data_offsets: [0] } }), data: 8, code: 'ERR_PENSTOCK_TENSOR_BAD_OFFSETS' },
  { name: 'offset beyond 2^53', header: `{"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 18446744073709551615]}}`, data: 8, code: 'ERR_PENSTOCK_TENSOR_BAD_OFFSETS' },
  { name: 'offsets reversed', header: t({ a: { ...ok, data_offsets: [8, 0] } }), data: 8, code: 'ERR_PENSTOCK_TENSOR_OFFSETS_OUT_OF_ORDER' },
  { name: 'offsets outside the data section', header: t({ a: { ...ok, data_offsets: [4, 12] } }), data: 8, code: 'ERR_PENSTOCK_TENSOR_OUTSIDE_DATA' },
  { name: 'overlapping tensors', header: t({ a: ok, b: { ...ok, data_offsets: [4, 12] } }), data: 12, code: 'ERR_PENSTOCK_TENSOR_OVERLAP' },
  { name: 'size not dtype × shape', header: t({ a: { ...ok, shape: [3] } }), data: 12, code: 'ERR_PENSTOCK_TENSOR_SIZE_MISMATCH' },
];

describe('malformed safetensors headers', () => {
  test('at least 20 distinct codes, each listed in TENSOR_ERROR_CODES', () => {
    const codes = new Set(CASES.map((c) => c.code));
    assert.ok(codes.size >= 20, `${codes.size} codes`);
    for (const c of codes) assert.ok(c in TENSOR_ERROR_CODES, c);
  });

  for (const c of CASES) {
    test(`${c.name}: ${c.code}, and no data read`, async () => {
      const f = file('bad');
      if (c.name.startsWith('file shorter')) fs.writeFileSync(f, Buffer.from([1, 2, 3]));
      else writeRawSafetensors(f, c.header, c.data ?? 0, c.length);
      const reads: { offset: number; size: number }[] = [];
      await assert.rejects(loadTensors(f, { host: true, openSource: recordingOpener(reads) }), (err: Error & { code?: string; path?: string }) => {
        assert.equal(err.code, c.code, err.message);
        assert.equal(err.name, 'TensorFormatError');
        assert.equal(err.path, f);
        return true;
      });
      // Only the opening read of the header region happened (offset 0, the file's first bytes).
      assert.ok(reads.every((r) => r.offset === 0 || r.offset === 8), JSON.stringify(reads));
    });
  }
});

describe('fuzzed headers', () => {
  test('random mutations of a valid header are accepted or rejected with a tensor code, never a crash', () => {
    const base = Buffer.from(t({ __metadata__: { format: 'pt' }, a: { dtype: 'BF16', shape: [2, 3], data_offsets: [0, 12] }, b: { dtype: 'F4', shape: [4], data_offsets: [12, 14] } }));
    let seed = 12345;
    const rnd = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32);
    const codes = new Map<string, number>();
    for (let i = 0; i < 3000; i++) {
      const m = Buffer.from(base);
      const edits = 1 + Math.floor(rnd() * 4);
      for (let e = 0; e < edits; e++) m[Math.floor(rnd() * m.length)] = Math.floor(rnd() * 256);
      const cut = rnd() < 0.2 ? m.subarray(0, Math.floor(rnd() * m.length)) : m;
      try {
        parseSafetensorsHeader(cut, 8 + cut.length + 14);
        codes.set('accepted', (codes.get('accepted') ?? 0) + 1);
      } catch (err) {
        const code = (err as { code?: string }).code ?? 'none';
        assert.ok(code in TENSOR_ERROR_CODES, `unexpected error ${code}: ${(err as Error).message}`);
        codes.set(code, (codes.get(code) ?? 0) + 1);
      }
    }
    assert.ok(codes.size >= 5, JSON.stringify([...codes]));
  });

  test('random bytes as a header never crash', () => {
    for (let i = 0; i < 500; i++) {
      const b = crypto.randomBytes(1 + (i % 200));
      try {
        parseSafetensorsHeader(b, b.length + 8);
      } catch (err) {
        assert.ok((err as { code: string }).code in TENSOR_ERROR_CODES);
      }
    }
  });
});

describe('valid layouts', () => {
  test('metadata, reverse order, gaps and a misaligned data section', async () => {
    const f = file('odd');
    const { tensors, dataStart } = writeSafetensors(
      f,
      [
        { name: 'w', dtype: 'F32', shape: [3, 5] },
        { name: 'b', dtype: 'I64', shape: [7] },
      ],
      { metadata: { format: 'pt', note: 'x' }, padding: 3, gap: 5, reverse: true },
    );
    assert.notEqual(dataStart % 8, 0);
    const cp = await describeCheckpoint(f);
    try {
      assert.deepEqual(cp.files[0]!.metadata, { format: 'pt', note: 'x' });
      assert.equal(cp.files[0]!.dataStart, dataStart);
      // Sorted by offset: b first (written first because of reverse).
      assert.deepEqual(cp.files[0]!.tensors.map((x) => x.name), ['b', 'w']);
    } finally {
      for (const x of cp.files) await x.source.close();
    }
    using set = await loadTensors(f, { host: true });
    for (const x of tensors) assert.ok(Buffer.from(set.get(x.name)!.data as Uint8Array).equals(x.data), x.name);
    assert.deepEqual(set.metadata[f], { format: 'pt', note: 'x' });
  });

  test('names such as __proto__ and constructor are plain tensor names', async () => {
    const f = file('proto');
    writeRawSafetensors(f, `{"__proto__": ${t(ok)}, "constructor": ${t({ ...ok, data_offsets: [8, 16] })}}`, 16);
    using set = await loadTensors(f, { host: true });
    assert.deepEqual(set.tensors.map((x) => x.name).sort(), ['__proto__', 'constructor']);
  });

  test('zero-size tensors and scalars', async () => {
    const f = file('zero');
    const { tensors } = writeSafetensors(f, [
      { name: 'empty', dtype: 'F32', shape: [0, 4] },
      { name: 'scalar', dtype: 'F64', shape: [] },
      { name: 'empty2', dtype: 'BF16', shape: [0] },
      { name: 'v', dtype: 'U8', shape: [3] },
    ]);
    using set = await loadTensors(f, { host: true });
    assert.equal(set.get('empty')!.byteLength, 0);
    assert.deepEqual(set.get('empty')!.shape, [0, 4]);
    assert.deepEqual(set.get('scalar')!.shape, []);
    assert.deepEqual(set.get('scalar')!.strides, []);
    for (const x of tensors) assert.ok(Buffer.from(set.get(x.name)!.data as Uint8Array).equals(x.data), x.name);
  });

  test('a file of only empty tensors, and a header with no tensors', async () => {
    const f = file('allempty');
    writeSafetensors(f, [{ name: 'e', dtype: 'F32', shape: [0] }]);
    using a = await loadTensors(f, { host: true });
    assert.equal(a.bytes, 0);
    const g = file('none');
    writeRawSafetensors(g, '{"__metadata__": {"k": "v"}}   ');
    using b = await loadTensors(g, { host: true });
    assert.equal(b.size, 0);
  });
});
