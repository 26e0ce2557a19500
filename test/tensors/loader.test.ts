/**
 * The loader on the host path: every dtype byte-exact, many tensors, sharded checkpoints and
 * lists of files, filters, row ranges, coalesced reads, progress and cancellation.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { loadTensors, open, type Dtype, type TensorSet } from '../../src/index.js';
import { DTYPES, planLoad, describeCheckpoint, closeCheckpoint, SLAB_ALIGNMENT } from '../../src/formats.js';
import { DTYPE_BITS } from '../../src/formats/dtypes.js';
import { tmpDir } from '../helpers.js';
import { writeSafetensors, writeSharded, type TensorSpec } from '../tensor-writer.js';

let n = 0;
const file = (name = 'l') => path.join(tmpDir(), `${name}-${++n}.safetensors`);
const dir = (name = 'ckpt') => path.join(tmpDir(), `${name}-${++n}`);
const bytesOf = (set: TensorSet, name: string) => Buffer.from(set.get(name)!.data as Uint8Array);

/** A shape whose element count fills whole bytes for every dtype (F6 needs a multiple of 4). */
const shapeFor = (d: Dtype, k: number): number[] => [4 + (k % 3), 8];

describe('dtypes', () => {
  test('every dtype of the format, byte-exact, with its element size', async () => {
    assert.ok(DTYPES.includes('F8_E4M3') && DTYPES.includes('F8_E5M2') && DTYPES.includes('F8_E8M0') && DTYPES.includes('F4') && DTYPES.includes('F6_E2M3') && DTYPES.includes('F6_E3M2'));
    const specs: TensorSpec[] = DTYPES.map((d, k) => ({ name: `t.${d}`, dtype: d, shape: shapeFor(d, k) }));
    const f = file('dtypes');
    const { tensors } = writeSafetensors(f, specs, { padding: 1 });
    using set = await loadTensors(f, { host: true });
    for (const t of tensors) {
      const v = set.get(t.name)!;
      assert.equal(v.dtype, t.dtype);
      assert.equal(v.byteLength, (t.shape[0]! * t.shape[1]! * DTYPE_BITS[t.dtype]) / 8, t.name);
      assert.deepEqual(v.strides, [t.shape[1], 1]);
      assert.ok(bytesOf(set, t.name).equals(t.data), t.name);
    }
  });
});

describe('many tensors', () => {
  test('a 10 000-tensor file in one read: every view exact, layout complete', async () => {
    const specs: TensorSpec[] = Array.from({ length: 10_000 }, (_, i) => ({ name: `layers.${i}.w`, dtype: i % 2 ? 'BF16' : 'F32', shape: [1 + (i % 5), 3] }));
    const f = file('many');
    const { tensors } = writeSafetensors(f, specs);
    using set = await loadTensors(f, { host: true });
    assert.equal(set.size, 10_000);
    assert.equal(set.files[0]!.operations, 1);
    for (const t of tensors) assert.ok(bytesOf(set, t.name).equals(t.data), t.name);
    const layout = set.layout();
    assert.equal(layout.length, 10_000);
    assert.deepEqual(Object.keys(layout[0]!).sort(), ['byteLength', 'byteOffset', 'dtype', 'name', 'shape', 'strides']);
  });
});

describe('checkpoints of several files', () => {
  const specs: TensorSpec[] = Array.from({ length: 12 }, (_, i) => ({ name: `model.layers.${i}.weight`, dtype: 'BF16', shape: [16, 8 + i] }));

  test('a sharded index: shards relative to the index, all read concurrently, index metadata kept', async () => {
    const d = dir();
    const { index, files, tensors } = writeSharded(d, specs, 3, { padding: 5 });
    using set = await loadTensors(index, { host: true });
    assert.equal(set.files.length, 3);
    assert.deepEqual(set.files.map((f) => f.path), files);
    for (const f of set.files) assert.equal(f.operations, 1);
    for (const t of tensors) assert.ok(bytesOf(set, t.name).equals(t.data), t.name);
    assert.equal((set.indexMetadata as { total_size: number }).total_size, tensors.reduce((a, t) => a + t.data.length, 0));
    // Each file's span starts aligned in the slab.
    const starts = files.map((f) => Math.min(...set.tensors.filter((t) => t.path === f).map((t) => t.byteOffset)));
    for (const s of starts) assert.equal(s % SLAB_ALIGNMENT, 0);
  });

  test('a list of files', async () => {
    const a = file('a');
    const b = file('b');
    const ta = writeSafetensors(a, specs.slice(0, 5)).tensors;
    const tb = writeSafetensors(b, specs.slice(5)).tensors;
    using set = await loadTensors([a, b], { host: true });
    for (const t of [...ta, ...tb]) assert.ok(bytesOf(set, t.name).equals(t.data));
  });

  test('the same name in two files is refused', async () => {
    const a = file('a');
    const b = file('b');
    writeSafetensors(a, specs.slice(0, 2));
    writeSafetensors(b, specs.slice(1, 3));
    await assert.rejects(loadTensors([a, b], { host: true }), { code: 'ERR_PENSTOCK_TENSOR_DUPLICATE_NAME' });
    await assert.rejects(describeCheckpoint([a, b]), (err: Error & { code?: string }) => err.code === 'ERR_PENSTOCK_TENSOR_DUPLICATE_NAME' && err.message.includes(a) && err.message.includes(b));
  });

  test('tensors read apart: one batch per file, bytes exact, every span counted, a short file refused', async () => {
    const a = file('apart');
    const b = file('apart');
    const scattered = (p: string): TensorSpec[] => Array.from({ length: 40 }, (_, i) => ({ name: `${p}.${i}`, dtype: 'F32', shape: [3 + (i % 5), 7] }));
    const ta = writeSafetensors(a, scattered('a')).tensors;
    const tb = writeSafetensors(b, scattered('b')).tensors;
    const chosen = [...ta, ...tb].filter((_, i) => i % 3 === 1);
    {
      using set = await loadTensors([a, b], { host: true, filter: chosen.map((t) => t.name), coalesceGap: 0 });
      for (const t of chosen) assert.ok(bytesOf(set, t.name).equals(t.data), t.name);
      for (const [k, rec] of set.files.entries()) {
        const mine = chosen.filter((t) => t.name.startsWith(k === 0 ? 'a.' : 'b.'));
        assert.equal(rec.operations, mine.length);
        assert.equal(rec.bytes, mine.reduce((n, t) => n + t.data.length, 0));
        assert.deepEqual(Object.keys(rec.routes), ['posix-host']);
        assert.equal(rec.routes['posix-host']!.bytes, rec.bytes);
        // One batch: its preads read through the small gaps, fewer than the spans (an operation each would be one each).
        assert.ok(rec.ops >= 1 && rec.ops < mine.length, `${rec.ops} preads for ${mine.length} spans`);
      }
    }
    // The file loses its last tensors once its size is known: the batch's short read is the load's error.
    const cut = file('apart');
    fs.copyFileSync(a, cut);
    const shrinking = async (loc: string) => {
      const f = await open(loc, 'r');
      const size = await f.size();
      fs.truncateSync(loc, size - 450); // into a.37, the last one chosen
      // Still the engine's file (so its spans go in a batch), reporting the size it had.
      return new Proxy(f, {
        get: (t, k) => {
          if (k === 'size') return async () => size;
          const v = Reflect.get(t, k, t) as unknown;
          return typeof v === 'function' ? v.bind(t) : v;
        },
      });
    };
    await assert.rejects(loadTensors(cut, { host: true, filter: ta.filter((_, i) => i % 3 === 1).map((t) => t.name), coalesceGap: 0, openSource: shrinking }), {
      code: 'ERR_PENSTOCK_TENSOR_SOURCE_CHANGED',
    });
  });

  test('a checkpoint names every tensor, a lone file\'s as well as a list\'s', async () => {
    const a = file('a');
    const b = file('b');
    const ta = writeSafetensors(a, specs.slice(0, 5)).tensors;
    writeSafetensors(b, specs.slice(5)).tensors;
    for (const input of [a, [a, b]]) {
      const cp = await describeCheckpoint(input);
      try {
        const all = cp.files.flatMap((f) => f.tensors);
        assert.equal(cp.tensors.size, all.length);
        for (const t of all) assert.equal(cp.tensors.get(t.name), t);
        assert.equal(cp.tensors, cp.tensors, 'the same map on every read');
        assert.ok(Object.keys(cp).includes('tensors'));
      } finally {
        await closeCheckpoint(cp);
      }
    }
    using some = await loadTensors(a, { host: true, filter: [ta[3]!.name, ta[0]!.name] });
    assert.deepEqual(some.tensors.map((t) => t.name), [ta[0]!.name, ta[3]!.name]);
  });

  test('index errors: not JSON, no weight_map, escaping paths, a missing or unlisted tensor, a duplicate entry', async () => {
    const d = dir();
    const { index } = writeSharded(d, specs, 2);
    const good = JSON.parse(fs.readFileSync(index, 'utf8'));
    const write = (text: string) => {
      const p = path.join(d, `bad-${++n}.index.json`);
      fs.writeFileSync(p, text);
      return p;
    };
    const cases: [string, string][] = [
      ['{"weight_map": ', 'ERR_PENSTOCK_TENSOR_INDEX_INVALID'],
      ['{"metadata": {}}', 'ERR_PENSTOCK_TENSOR_INDEX_INVALID'],
      [JSON.stringify({ weight_map: { ...good.weight_map, x: '../other.safetensors' } }), 'ERR_PENSTOCK_TENSOR_INDEX_BAD_PATH'],
      [JSON.stringify({ weight_map: { ...good.weight_map, 'not.there': 'model-00001-of-00002.safetensors' } }), 'ERR_PENSTOCK_TENSOR_INDEX_MISMATCH'],
      [JSON.stringify({ weight_map: Object.fromEntries(Object.entries(good.weight_map).slice(1)) }), 'ERR_PENSTOCK_TENSOR_INDEX_MISMATCH'],
      ['{"weight_map": {"a": "x.safetensors", "a": "y.safetensors"}}', 'ERR_PENSTOCK_TENSOR_DUPLICATE_NAME'],
    ];
    for (const [text, code] of cases) await assert.rejects(loadTensors(write(text), { host: true }), { code }, text);
    await assert.rejects(loadTensors(path.join(d, 'nothing.index.json'), { host: true }), { code: 'ENOENT' });
  });
});

describe('filters and row ranges', () => {
  const specs: TensorSpec[] = [
    { name: 'embed', dtype: 'BF16', shape: [10, 6] },
    { name: 'layers.0.q', dtype: 'F32', shape: [9, 4] },
    { name: 'layers.0.norm', dtype: 'F32', shape: [4] },
    { name: 'layers.1.q', dtype: 'F32', shape: [9, 4] },
    { name: 'layers.1.norm', dtype: 'F32', shape: [4] },
    { name: 'packed', dtype: 'F4', shape: [6, 4] },
  ];

  test('a list, a prefix and a predicate; unknown names refused', async () => {
    const f = file('filter');
    const { tensors } = writeSafetensors(f, specs);
    const data = new Map(tensors.map((t) => [t.name, t.data]));
    using a = await loadTensors(f, { host: true, filter: ['layers.1.q', 'embed'] });
    assert.deepEqual(a.tensors.map((t) => t.name), ['embed', 'layers.1.q']);
    for (const t of a.tensors) assert.ok(bytesOf(a, t.name).equals(data.get(t.name)!));
    assert.equal(a.bytes, data.get('embed')!.length + data.get('layers.1.q')!.length + data.get('layers.0.q')!.length + 16 /* coalesced gap */ , 'gap read through');
    using b = await loadTensors(f, { host: true, filter: { prefix: 'layers.0.' } });
    assert.deepEqual(b.tensors.map((t) => t.name), ['layers.0.q', 'layers.0.norm']);
    using c = await loadTensors(f, { host: true, filter: (name) => name.endsWith('norm') });
    assert.deepEqual(c.tensors.map((t) => t.name), ['layers.0.norm', 'layers.1.norm']);
    for (const t of c.tensors) assert.ok(bytesOf(c, t.name).equals(data.get(t.name)!));
    await assert.rejects(loadTensors(f, { host: true, filter: ['nope'] }), { code: 'ERR_PENSTOCK_TENSOR_NOT_FOUND' });
  });

  test('without coalescing, separated tensors are separate reads of exactly their bytes', async () => {
    const f = file('filter');
    const { tensors } = writeSafetensors(f, specs);
    using set = await loadTensors(f, { host: true, filter: ['embed', 'layers.1.q'], coalesceGap: 0 });
    assert.equal(set.files[0]!.operations, 2);
    assert.equal(set.bytes, tensors[0]!.data.length + tensors[3]!.data.length);
  });

  test('row shard k of N: only those rows of each 2-D tensor; others whole', async () => {
    const f = file('rows');
    const { tensors } = writeSafetensors(f, specs);
    const data = new Map(tensors.map((t) => [t.name, t]));
    for (let k = 0; k < 3; k++) {
      using set = await loadTensors(f, { host: true, rows: { index: k, count: 3 }, coalesceGap: 0 });
      const q = set.get('layers.0.q')!;
      assert.deepEqual(q.rows, { begin: k * 3, end: k * 3 + 3, of: 9 });
      assert.deepEqual(q.shape, [3, 4]);
      assert.ok(bytesOf(set, 'layers.0.q').equals(data.get('layers.0.q')!.data.subarray(k * 3 * 16, (k + 1) * 3 * 16)));
      const e = set.get('embed')!;
      const [b, end] = [Math.floor((k * 10) / 3), Math.floor(((k + 1) * 10) / 3)];
      assert.deepEqual(e.shape, [end - b, 6]);
      assert.ok(bytesOf(set, 'embed').equals(data.get('embed')!.data.subarray(b * 12, end * 12)));
      assert.ok(bytesOf(set, 'layers.1.norm').equals(data.get('layers.1.norm')!.data));
      assert.ok(bytesOf(set, 'packed').equals(data.get('packed')!.data.subarray(k * 2 * 2, (k + 1) * 2 * 2)));
      // Only the chosen rows were read.
      assert.equal(set.bytes, set.tensors.reduce((a, t) => a + t.byteLength, 0));
    }
  });

  test('bad row shards and rows that do not start on a byte are refused', async () => {
    const f = file('rows');
    writeSafetensors(f, [{ name: 'odd', dtype: 'F4', shape: [4, 3] }]);
    await assert.rejects(loadTensors(f, { host: true, rows: { index: 0, count: 2 } }), { code: 'ERR_PENSTOCK_TENSOR_ROW_SPLIT' });
    await assert.rejects(loadTensors(f, { host: true, rows: { index: 2, count: 2 } }), { code: 'ERR_PENSTOCK_TENSOR_ROW_SPLIT' });
  });

  test('the plan: spans, slab offsets and sizes', async () => {
    const f = file('plan');
    writeSafetensors(f, specs, { padding: 3 });
    const cp = await describeCheckpoint(f);
    try {
      const all = planLoad(cp);
      assert.equal(all.spans.length, 1);
      assert.equal(all.spans[0]!.fileOffset, cp.files[0]!.dataStart);
      assert.equal(all.slabBytes, cp.files[0]!.size - cp.files[0]!.dataStart);
      const some = planLoad(cp, { filter: ['layers.1.norm', 'embed'], coalesceGap: 0 });
      assert.equal(some.spans.length, 2);
      assert.equal(some.spans[1]!.slabOffset % SLAB_ALIGNMENT, 0);
      assert.equal(some.readBytes, 120 + 16);
    } finally {
      await closeCheckpoint(cp);
    }
  });
});

describe('progress and cancellation', () => {
  test('progress reaches the total; an aborted load rejects with AbortError', async () => {
    const specs: TensorSpec[] = Array.from({ length: 8 }, (_, i) => ({ name: `w${i}`, dtype: 'F32', shape: [512, 1024] }));
    const f = file('big');
    writeSafetensors(f, specs);
    const seen: number[] = [];
    using set = await loadTensors(f, { host: true, onProgress: (d, total) => seen.push(d, total) });
    assert.equal(seen.at(-2), set.bytes);
    assert.equal(seen.at(-1), set.bytes);
    const ac = new AbortController();
    ac.abort(new Error('stop'));
    await assert.rejects(loadTensors(f, { host: true, signal: ac.signal }), { name: 'AbortError' });
    const ac2 = new AbortController();
    const p = loadTensors(f, { host: true, signal: ac2.signal, onProgress: () => ac2.abort() });
    await assert.rejects(p, { name: 'AbortError' });
  });

  test('a file cut short after its header was written is reported, not loaded', async () => {
    const f = file('cut');
    writeSafetensors(f, [{ name: 'w', dtype: 'F32', shape: [100] }]);
    const size = fs.statSync(f).size;
    fs.truncateSync(f, size - 10);
    await assert.rejects(loadTensors(f, { host: true }), { code: 'ERR_PENSTOCK_TENSOR_OUTSIDE_DATA' });
  });
});


describe('sources other than local files', () => {
  /** An in-memory object store with the loader's read surface, named by URL. */
  function memoryStore(objects: Map<string, Buffer>) {
    const opened: string[] = [];
    const closed: string[] = [];
    const openSource = async (url: string) => {
      const body = objects.get(url);
      if (!body) throw Object.assign(new Error(`no object ${url}`), { code: 'ENOENT' });
      opened.push(url);
      return {
        path: url,
        size: async () => body.length,
        close: async () => void closed.push(url),
        read: async (target: unknown, o: { fileOffset?: number; size?: number; targetOffset?: number }) => {
          const from = o.fileOffset ?? 0;
          const n = Math.max(0, Math.min(o.size ?? 0, body.length - from));
          new Uint8Array((target as Uint8Array).buffer, (target as Uint8Array).byteOffset + (o.targetOffset ?? 0), n).set(body.subarray(from, from + n));
          return n;
        },
      };
    };
    return { openSource, opened, closed };
  }

  test('an index and its shards behind URLs, through openSource; every source closed', async () => {
    const d = dir('remote');
    const specs: TensorSpec[] = Array.from({ length: 6 }, (_, i) => ({ name: `w${i}`, dtype: 'F16', shape: [8, 4 + i] }));
    const { index, files, tensors } = writeSharded(d, specs, 2);
    const objects = new Map<string, Buffer>();
    objects.set('s3://bucket/ckpt/model.safetensors.index.json', fs.readFileSync(index));
    for (const f of files) objects.set(`s3://bucket/ckpt/${path.basename(f)}`, fs.readFileSync(f));
    const store = memoryStore(objects);
    using set = await loadTensors('s3://bucket/ckpt/model.safetensors.index.json', { host: true, openSource: store.openSource });
    for (const t of tensors) assert.ok(bytesOf(set, t.name).equals(t.data), t.name);
    assert.deepEqual(set.files.map((f) => f.path), files.map((f) => `s3://bucket/ckpt/${path.basename(f)}`));
    assert.deepEqual(Object.keys(set.files[0]!.routes), ['posix-host']);
    assert.deepEqual([...store.closed].sort(), [...store.opened].sort());
  });
});
