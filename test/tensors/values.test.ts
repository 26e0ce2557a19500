/**
 * Host-loaded tensors carry a typed `values` view of their element type where JavaScript has
 * one; tensors a file leaves misaligned get an aligned place of their own so the view exists.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { test } from 'node:test';
import { tmpDir, useFakeDriver } from '../helpers.js';
import { writeSafetensors, type TensorSpec } from '../tensor-writer.js';

useFakeDriver();
const p = await import('../../src/index.js');

let n = 0;
const file = () => path.join(tmpDir(), `values-${++n}.safetensors`);

const EXPECTED: Record<string, string | undefined> = {
  F32: 'Float32Array', F64: 'Float64Array', I8: 'Int8Array', U8: 'Uint8Array', BOOL: 'Uint8Array', I16: 'Int16Array', U16: 'Uint16Array',
  I32: 'Int32Array', U32: 'Uint32Array', I64: 'BigInt64Array', U64: 'BigUint64Array',
  F16: typeof (globalThis as { Float16Array?: unknown }).Float16Array === 'function' ? 'Float16Array' : undefined,
  BF16: undefined, F8_E4M3: undefined, F8_E5M2: undefined, C64: undefined, F4: undefined,
};

/** Element i of a tensor read straight from its bytes, as the typed array would give it. */
function element(dtype: string, b: Buffer, i: number): number | bigint {
  switch (dtype) {
    case 'F32': return b.readFloatLE(i * 4);
    case 'F64': return b.readDoubleLE(i * 8);
    case 'I8': return b.readInt8(i);
    case 'U8': case 'BOOL': return b.readUInt8(i);
    case 'I16': return b.readInt16LE(i * 2);
    case 'U16': return b.readUInt16LE(i * 2);
    case 'I32': return b.readInt32LE(i * 4);
    case 'U32': return b.readUInt32LE(i * 4);
    case 'I64': return b.readBigInt64LE(i * 8);
    case 'U64': return b.readBigUInt64LE(i * 8);
    default: throw new Error(dtype);
  }
}

test('every dtype: values of the right kind, equal element by element to the file; misaligned tensors too, in one read', async () => {
  // A 1-byte tensor first and odd-sized ones between: most tensors start off their alignment.
  const specs: TensorSpec[] = [{ name: 'pad', dtype: 'U8', shape: [3] }];
  for (const [i, dtype] of Object.keys(EXPECTED).entries()) {
    specs.push({ name: `t.${dtype}`, dtype: dtype as TensorSpec['dtype'], shape: [2, 4] });
    specs.push({ name: `odd.${i}`, dtype: 'I8', shape: [1 + (i % 3)] });
  }
  const f = file();
  const { tensors } = writeSafetensors(f, specs, { padding: 1 });
  for (const host of [true, 'pinned'] as const) {
    using set = await p.loadTensors(f, { host });
    assert.equal(set.files[0]!.operations, 1, 'still one read');
    for (const t of tensors) {
      const v = set.get(t.name)!;
      assert.ok(Buffer.from(v.data as Uint8Array).equals(t.data), `${t.name} bytes`);
      const kind = EXPECTED[t.dtype];
      if (kind === undefined) {
        assert.equal(v.values, undefined, t.name);
        continue;
      }
      assert.equal(v.values?.constructor.name, kind, t.name);
      assert.equal(v.values!.byteOffset % (v.values as { BYTES_PER_ELEMENT: number }).BYTES_PER_ELEMENT, 0);
      assert.equal(v.values!.buffer, (v.data as Uint8Array).buffer, 'a view of the slab, not a copy');
      assert.equal(v.values!.byteOffset, (v.data as Uint8Array).byteOffset);
      if (t.dtype === 'F16') continue;
      for (let i = 0; i < v.values!.length; i++) assert.ok(Object.is(v.values![i], element(t.dtype, t.data, i)), `${t.name}[${i}]`);
    }
    assert.ok((await p.verifyTensorSet(set)).every((c) => c.match));
    assert.equal(set.get('t.F32')!.values!.length, 8);
  }
});

test('GPU sets have no values; their layout is what it was (no aligned copies)', async () => {
  const f = file();
  writeSafetensors(f, [{ name: 'a', dtype: 'U8', shape: [3] }, { name: 'b', dtype: 'F32', shape: [4] }]);
  using set = await p.loadTensors(f);
  assert.equal(set.get('b')!.values, undefined);
  assert.equal(set.get('b')!.byteOffset, 3);
  using host = await p.loadTensors(f, { host: true });
  assert.equal(host.get('b')!.byteOffset % 4, 0);
  assert.deepEqual([...(host.get('b')!.values as Float32Array)], [...new Float32Array(Uint8Array.from(host.get('b')!.data as Uint8Array).buffer)]);
});
