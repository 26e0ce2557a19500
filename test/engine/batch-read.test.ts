/** Batched reads into host memory: byte-exact per range, end of file, errors per range, abort. */
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { configure, getConfig, open } from '../../src/index.js';
import { readBatch, type BatchRange } from '../../src/batch.js';
import { stats } from '../../src/measure.js';
import fs from 'node:fs';
import { native } from '../../src/addon/binding.js';
import { BATCH_PART_PIECES, BATCH_RING_ENTRIES, BATCH_RING_SCRATCH, columnsOf, planBatch, planParts } from '../../src/plan/batch-plan.js';
import { readBatchInParts } from '../../src/engine/batch/batch-read.js';
import { makeFile } from '../helpers.js';

const initial = getConfig();
after(() => configure(initial));
const KiB = 1024;

/** A fixed pseudo-random sequence. */
function rng(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 2 ** 32;
  };
}

describe('readBatch into host memory', () => {
  test('every range byte-exact: random, adjacent, near, overlapping, empty; bytes outside untouched', async () => {
    for (const threads of [1, 4]) {
      configure({ threads, taskSize: 64 * KiB });
      const { file, data } = makeFile(3 << 20);
      await using f = await open(file);
      const next = rng(threads + 11);
      const targets: Uint8Array[] = [Buffer.alloc(2 << 20, 0xee), new Uint8Array(new SharedArrayBuffer(1 << 20)).fill(0xee)];
      const ranges: BatchRange[] = [];
      let at = [0, 0];
      const add = (fileOffset: number, size: number) => {
        const t = ranges.length % 2;
        ranges.push({ fileOffset, size, target: targets[t]!, targetOffset: at[t]! });
        at[t]! += size + 3;
      };
      for (let i = 0; i < 150; i++) add(Math.floor(next() * (3 << 20) - 200 * KiB), Math.floor(next() * 9000));
      for (let i = 0; i < 20; i++) add(100_000 + i * 4096, 4096); // adjacent
      for (let i = 0; i < 20; i++) add(900_000 + i * 6000, 5000); // near
      add(5000, 200 * KiB); // longer than a read: cut
      add(5000, 100); // overlapping the one before
      add(777, 0);
      for (const r of ranges) r.fileOffset = Math.max(0, r.fileOffset);
      const res = await readBatch(ranges, { file: f });
      assert.equal(res.errors.size, 0);
      const covered = targets.map((t) => new Uint8Array(t.length));
      let total = 0;
      ranges.forEach((r, i) => {
        const t = r.target as Uint8Array;
        const off = r.targetOffset!;
        assert.equal(res.bytes[i], r.size, `range ${i} bytes`);
        assert.ok(Buffer.from(t.buffer, t.byteOffset + off, r.size).equals(data.subarray(r.fileOffset, r.fileOffset + r.size)), `range ${i} data`);
        covered[targets.indexOf(t)]!.fill(1, off, off + r.size);
        total += r.size;
      });
      assert.equal(res.totalBytes, total);
      targets.forEach((t, k) => t.forEach((b, j) => covered[k]![j] || assert.equal(b, 0xee, `target ${k} byte ${j} untouched`)));
      const rec = res.record;
      assert.equal(rec.ranges, ranges.length);
      assert.equal(rec.routes['posix-host']?.bytes, total);
      assert.ok(rec.routes['posix-host']!.ops < ranges.length, 'near ranges shared preads');
    }
  });

  test('ranges of several files; a range reaching end of file is short, not an error', async () => {
    configure({ threads: 4, taskSize: 4 << 20 });
    const a = makeFile(10_000);
    const b = makeFile(50_000);
    await using fa = await open(a.file);
    await using fb = await open(b.file);
    const t = Buffer.alloc(30_000, 0xee);
    const res = await readBatch([
      { file: fa, fileOffset: 9000, size: 4000, target: t, targetOffset: 0 },
      { file: fb, fileOffset: 100, size: 4000, target: t, targetOffset: 5000 },
      { file: fa, fileOffset: 20_000, size: 100, target: t, targetOffset: 10_000 },
      { file: fb, fileOffset: 46_000, size: 8000, target: t, targetOffset: 12_000 },
    ]);
    assert.deepEqual([...res.bytes], [1000, 4000, 0, 4000]);
    assert.equal(res.errors.size, 0);
    assert.ok(t.subarray(0, 1000).equals(a.data.subarray(9000)));
    assert.ok(t.subarray(1000, 5000).every((x) => x === 0xee), 'past end of file untouched');
    assert.ok(t.subarray(5000, 9000).equals(b.data.subarray(100, 4100)));
    assert.ok(t.subarray(10_000, 12_000).every((x) => x === 0xee));
    assert.ok(t.subarray(12_000, 16_000).equals(b.data.subarray(46_000)));
    assert.ok(t.subarray(16_000).every((x) => x === 0xee));
  });

  test('a failing file fails its ranges only, each with its error', async () => {
    const { file, data } = makeFile(64 * KiB);
    await using good = await open(file);
    // Reading address 0 of the process's own memory fails with EIO.
    await using bad = await open('/proc/self/mem');
    const t = Buffer.alloc(4 * 4096, 0xee);
    const res = await readBatch([
      { file: good, fileOffset: 0, size: 4096, target: t, targetOffset: 0 },
      { file: bad, fileOffset: 0, size: 4096, target: t, targetOffset: 4096 },
      { file: good, fileOffset: 8192, size: 4096, target: t, targetOffset: 8192 },
      { file: bad, fileOffset: 64, size: 100, target: t, targetOffset: 12288 },
    ]);
    assert.deepEqual([...res.errors.keys()].sort(), [1, 3]);
    for (const i of [1, 3]) {
      const e = res.errors.get(i) as Error & { code?: string; syscall?: string };
      assert.equal(e.code, 'EIO');
      assert.equal(e.syscall, 'pread');
    }
    assert.deepEqual([...res.bytes], [4096, 0, 4096, 0]);
    assert.ok(t.subarray(0, 4096).equals(data.subarray(0, 4096)));
    assert.ok(t.subarray(8192, 12288).equals(data.subarray(8192, 12288)));
    assert.ok(t.subarray(4096, 8192).every((x) => x === 0xee));
  });

  test('abort before or during the batch rejects with AbortError', async () => {
    const { file } = makeFile(1 << 20);
    await using f = await open(file);
    const t = Buffer.alloc(1 << 20);
    const ranges = Array.from({ length: 2000 }, (_, i) => ({ fileOffset: (i * 4096) % (1 << 20), size: 512, target: t, targetOffset: (i * 512) % (1 << 20) }));
    const before = new AbortController();
    before.abort(new Error('no'));
    await assert.rejects(readBatch(ranges, { file: f, signal: before.signal }), { name: 'AbortError' });
    const during = new AbortController();
    const p = readBatch(ranges, { file: f, signal: during.signal });
    during.abort('stop');
    await assert.rejects(p, (e: Error & { cause?: unknown }) => e.name === 'AbortError' && e.cause === 'stop');
    // The file still works afterwards.
    assert.equal((await readBatch(ranges.slice(0, 3), { file: f })).totalBytes, 1536);
  });

  test('bad input rejects the whole batch before anything is read', async () => {
    const { file } = makeFile(8192);
    await using f = await open(file);
    const t = Buffer.alloc(100, 0xee);
    const cases: [BatchRange[], string][] = [
      [[{ fileOffset: -1, size: 1, target: t }], 'ERR_PENSTOCK_INVALID_ARGUMENT'],
      [[{ fileOffset: 0, size: 1.5, target: t }], 'ERR_PENSTOCK_INVALID_ARGUMENT'],
      [[{ fileOffset: 0, size: 10, target: t }, { fileOffset: 0, size: 10, target: t, targetOffset: 95 }], 'ERR_PENSTOCK_OUT_OF_RANGE'],
      [[{ fileOffset: 0, size: 10, target: 'x' as unknown as Buffer }], 'ERR_PENSTOCK_INVALID_BUFFER'],
    ];
    for (const [ranges, code] of cases) await assert.rejects(readBatch(ranges, { file: f }), { code });
    await assert.rejects(readBatch([{ fileOffset: 0, size: 1, target: t }]), { code: 'ERR_PENSTOCK_NO_FILE' });
    await using w = await open(makeFile(10).file, 'w');
    await assert.rejects(readBatch([{ file: w, fileOffset: 0, size: 1, target: t }]), { code: 'ERR_PENSTOCK_NOT_READABLE' });
    const closed = await open(file);
    await closed.close();
    await assert.rejects(readBatch([{ file: closed, fileOffset: 0, size: 1, target: t }]), { code: 'ERR_PENSTOCK_FILE_CLOSED' });
    await assert.rejects(readBatch('x' as unknown as BatchRange[]), { code: 'ERR_PENSTOCK_INVALID_ARGUMENT' });
    assert.ok(t.every((x) => x === 0xee), 'nothing was read');
  });

  test('one progress stream up to the total; process-wide stats count preads; close() waits', async () => {
    configure({ threads: 4, taskSize: 64 * KiB });
    const { file, data } = makeFile(2 << 20);
    const f = await open(file);
    const t = Buffer.alloc(2 << 20);
    const ranges = Array.from({ length: 64 }, (_, i) => ({ fileOffset: i * 32 * KiB, size: 16 * KiB, target: t, targetOffset: i * 16 * KiB }));
    const seen: number[] = [];
    const before = stats().routes['posix-host'];
    const p = readBatch(ranges, { file: f, onProgress: (n) => seen.push(n) });
    const closing = f.close();
    const res = await p;
    await closing;
    assert.equal(seen.at(-1), 64 * 16 * KiB);
    assert.ok(seen.every((n, i) => i === 0 || n > seen[i - 1]!), 'progress only grows');
    const after = stats().routes['posix-host'];
    assert.equal(after.ops - before.ops, res.record.routes['posix-host']!.ops);
    assert.equal(after.bytes - before.bytes, 64 * 16 * KiB);
    assert.equal(after.operations - before.operations, 1);
    for (let i = 0; i < 64; i++) assert.ok(t.subarray(i * 16 * KiB, (i + 1) * 16 * KiB).equals(data.subarray(i * 32 * KiB, i * 32 * KiB + 16 * KiB)));
  });
});

describe('readBatch in parts', () => {
  test('a batch in many parts: byte-exact, errors per range in every part, one progress stream', async () => {
    configure({ threads: 4, taskSize: 64 * KiB });
    const { file, data } = makeFile(1 << 20);
    await using good = await open(file);
    await using bad = await open('/proc/self/mem');
    const next = rng(5);
    const t = Buffer.alloc(300 * 4096, 0xee);
    const ranges: BatchRange[] = Array.from({ length: 300 }, (_, i) => ({
      file: i % 37 === 5 ? bad : good, fileOffset: i % 37 === 5 ? 0 : Math.floor(next() * 255) * 4096 + (i % 7), size: 4000, target: t, targetOffset: i * 4096,
    }));
    const seen: number[] = [];
    const res = await readBatchInParts(ranges, { onProgress: (n) => seen.push(n) }, 7);
    assert.equal(res.record.parts, 6, 'parts of 7, 14, 28, 56, 112 and the last 83 pieces');
    const failed = ranges.flatMap((r, i) => (r.file === bad ? [i] : []));
    assert.deepEqual([...res.errors.keys()].sort((a, b) => a - b), failed);
    for (const i of failed) assert.equal((res.errors.get(i) as Error & { code: string }).code, 'EIO');
    ranges.forEach((r, i) => {
      const got = t.subarray(i * 4096, i * 4096 + 4000);
      if (r.file === bad) {
        assert.equal(res.bytes[i], 0);
        assert.ok(got.every((b) => b === 0xee), `range ${i} untouched`);
      } else {
        assert.equal(res.bytes[i], 4000);
        assert.ok(got.equals(data.subarray(r.fileOffset, r.fileOffset + 4000)), `range ${i}`);
      }
      assert.ok(t.subarray(i * 4096 + 4000, (i + 1) * 4096).every((b) => b === 0xee), `gap after range ${i} untouched`);
    });
    const total = (300 - failed.length) * 4000;
    assert.equal(res.totalBytes, total);
    assert.equal(res.record.routes['posix-host']!.bytes, total);
    assert.equal(seen.at(-1), total);
    assert.ok(seen.every((n, i) => i === 0 || n > seen[i - 1]!), 'progress only grows over the parts');
    assert.equal(res.record.tasks >= res.record.parts, true);
  });

  test('the public call splits a large batch into parts; abort cancels every part', async () => {
    configure({ threads: 2, taskSize: 64 * KiB });
    const { file, data } = makeFile(4 << 20);
    await using f = await open(file);
    const n = 3 * BATCH_PART_PIECES + 100;
    const t = Buffer.alloc(n * 512);
    const ranges = Array.from({ length: n }, (_, i) => ({ fileOffset: ((i * 7919) % 1000) * 4096, size: 512, target: t, targetOffset: i * 512 }));
    const res = await readBatch(ranges, { file: f });
    assert.equal(res.record.parts, 3, 'a first part, one twice its size, and the rest');
    ranges.forEach((r, i) => assert.ok(t.subarray(i * 512, (i + 1) * 512).equals(data.subarray(r.fileOffset, r.fileOffset + 512)), `range ${i}`));
    const ac = new AbortController();
    const p = readBatchInParts(ranges, { file: f, signal: ac.signal }, 64);
    ac.abort('enough');
    await assert.rejects(p, (e: Error & { cause?: unknown }) => e.name === 'AbortError' && e.cause === 'enough');
    // Every part had settled: the target is still for the caller alone.
    const snapshot = Buffer.from(t);
    await new Promise((r) => setTimeout(r, 50));
    assert.ok(t.equals(snapshot), 'nothing written after the rejection');
  });

  test('a part the addon refuses: the parts already submitted are cancelled and waited for, then the refusal rejects', async () => {
    configure({ threads: 2, taskSize: 64 * KiB });
    const { file } = makeFile(1 << 20);
    await using f = await open(file);
    const t = Buffer.alloc(3000 * 512, 0xee);
    const ranges = Array.from({ length: 3000 }, (_, i) => ({ fileOffset: ((i * 7919) % 250) * 4096, size: 512, target: t, targetOffset: i * 512 }));
    const addon = native();
    const submitBatch = addon.submitBatch;
    let calls = 0;
    let first: ReturnType<typeof submitBatch> | undefined;
    let firstSettled = false;
    addon.submitBatch = (spec) => {
      if (++calls === 2) throw { record: { kind: 'penstock', code: 'ERR_PENSTOCK_INTERNAL', message: 'refused' } };
      first = submitBatch.call(addon, spec);
      first.promise.then(() => (firstSettled = true), () => (firstSettled = true));
      return first;
    };
    try {
      await assert.rejects(readBatchInParts(ranges, { file: f }, 100), { code: 'ERR_PENSTOCK_INTERNAL', message: /refused/ });
    } finally {
      addon.submitBatch = submitBatch;
    }
    assert.equal(calls, 2, 'no part after the refused one was submitted');
    assert.ok(first, 'the first part was submitted');
    assert.ok(firstSettled, 'the first part had settled before the batch rejected');
    const snapshot = Buffer.from(t);
    await new Promise((r) => setTimeout(r, 50));
    assert.ok(t.equals(snapshot), 'nothing written after the rejection');
    assert.equal((await readBatch(ranges.slice(0, 5), { file: f })).totalBytes, 2560, 'the file works afterwards');
  });
});

describe('batch reads through io_uring', () => {
  // 64 ranges 64 KiB apart (no two share a pread), some straight into the target and some
  // through scratch (offset by 1 in the target), the last one short at end of file.
  const count = 64;
  const setup = (size: number) => {
    const { file: path, data } = makeFile(size);
    const ranges = Array.from({ length: count }, (_, i) => ({
      file: 0, fileOffset: i * 64 * KiB + (i === count - 1 ? 60 * KiB : 0), size: 8 * KiB, target: 0, targetOffset: i * 8 * KiB, device: -1,
    }));
    return { path, data, ranges };
  };

  test('the public call issues its reads through io_uring, or says why not', async () => {
    const { path, data, ranges } = setup((count - 1) * 64 * KiB + 64 * KiB);
    await using f = await open(path);
    // Ranges 9 KiB apart in the target, odd ones shifted by a byte.
    const target = Buffer.alloc(count * 9 * KiB + 1, 0x77);
    const res = await readBatch(ranges.map((r, i) => ({ fileOffset: r.fileOffset, size: r.size, target, targetOffset: i * 9 * KiB + (i % 2) })), { file: f });
    for (let i = 0; i < count; i++) {
      const at = i * 9 * KiB + (i % 2);
      const n = res.bytes[i]!;
      assert.equal(n, i === count - 1 ? 4 * KiB : 8 * KiB);
      assert.ok(target.subarray(at, at + n).equals(data.subarray(ranges[i]!.fileOffset, ranges[i]!.fileOffset + n)), `range ${i}`);
    }
    assert.equal(target[(count - 1) * 9 * KiB + 1 + 4 * KiB], 0x77, 'the byte after the last range is untouched');
    assert.equal(target[8 * KiB], 0x77, 'the bytes between ranges are untouched');
    const r = res.record;
    if (r.fallbacks.length) assert.deepEqual(r.fallbacks.map((f) => f.code), ['IO_URING_UNAVAILABLE']);
    else assert.ok(r.ringReads > 0 && r.ringReads <= r.routes['posix-host']!.ops, `ring reads ${r.ringReads} of ${r.routes['posix-host']!.ops}`);
  });

  test('a ring that cannot be set up: every read by pread, byte-exact, with the error', async () => {
    const { path, data, ranges } = setup(count * 64 * KiB);
    const fd = fs.openSync(path, 'r');
    try {
      const target = new Uint8Array(count * 8 * KiB);
      const plan = planBatch(columnsOf(ranges), { threads: 2, hostReadMax: 1 << 20, deviceReadMax: () => 1 << 20, hostTargets: 1 });
      const spec = {
        fds: Int32Array.of(fd), reads: plan.reads, pieces: plan.pieces, tasks: plan.tasks, hostTargets: [target.buffer],
        deviceTargets: new BigUint64Array(0), deviceLengths: new Float64Array(0), deviceOrdinals: new Int32Array(0),
        pieceBytes: new Float64Array(plan.pieceRange.length), ringScratch: BATCH_RING_SCRATCH,
      };
      // The last range is short at end of file: the rest of its target stays 0.
      const expected = Buffer.alloc(target.length);
      ranges.forEach((r, i) => data.copy(expected, i * 8 * KiB, r.fileOffset, Math.min(data.length, r.fileOffset + r.size)));
      // More entries than io_uring_setup takes (32768): it refuses with EINVAL.
      const refused = await native().submitBatch({ ...spec, ring: 65536 }).promise;
      assert.equal(refused.ringReads, 0);
      assert.equal(refused.ringError?.code, 'EINVAL');
      assert.equal(refused.preads, count);
      assert.ok(Buffer.from(target).equals(expected), 'by pread');
      target.fill(0);
      const ringed = await native().submitBatch({ ...spec, pieceBytes: new Float64Array(plan.pieceRange.length), ring: BATCH_RING_ENTRIES }).promise;
      assert.equal(ringed.preads, count);
      assert.ok(ringed.ringError === null || ringed.ringReads === 0, 'an error only where nothing went through a ring');
      assert.ok(Buffer.from(target).equals(expected), 'through the ring');
      assert.throws(() => native().submitBatch({ ...spec, ring: 8, ringScratch: 0 }), /ringScratch must be positive/);
      assert.throws(() => native().submitBatch({ ...spec, ring: -1 }), /ring/);
    } finally {
      fs.closeSync(fd);
    }
  });
});

describe('batch plan', () => {
  const limits = { threads: 4, hostReadMax: 1 << 20, deviceReadMax: () => 64 * KiB, hostTargets: 1 };

  test('adjacent ranges into adjacent memory are one pread straight into the target', () => {
    const ranges = Array.from({ length: 8 }, (_, i) => ({ file: 0, fileOffset: 4096 * (7 - i), size: 4096, target: 0, targetOffset: 4096 * (7 - i), device: -1 }));
    const p = planBatch(columnsOf(ranges), limits);
    assert.equal(p.reads.length / 7, 1);
    assert.deepEqual([...p.reads], [0, 0, 32768, 0, 8, 0, 0]);
  });

  test('near ranges share a read through scratch; far ones do not; files and memories never mix', () => {
    const r = (file: number, fileOffset: number, device = -1, target = 0) => ({ file, fileOffset, size: 100, target, targetOffset: 0, device });
    const p = planBatch(columnsOf([r(0, 0), r(0, 5000), r(0, 500_000), r(1, 200), r(0, 300, 0, 1)]), { ...limits, hostTargets: 1 });
    const reads = Array.from({ length: p.reads.length / 7 }, (_, i) => [...p.reads.subarray(i * 7, i * 7 + 7)]);
    assert.deepEqual(reads.map((x) => [x[0], x[1], x[2], x[4], x[5]]), [
      [0, 0, 5100, 2, -1],
      [0, 500_000, 100, 1, 0],
      [1, 200, 100, 1, 0],
      [0, 300, 100, 1, -1],
    ]);
    assert.deepEqual([...p.tasks], [0, 3, -1, 3, 1, 0]);
  });

  test('device reads are ordered by target and cut to the staging half', () => {
    const ranges = [
      { file: 0, fileOffset: 900_000, size: 10, target: 1, targetOffset: 0, device: 0 },
      { file: 0, fileOffset: 100, size: 100 * KiB, target: 1, targetOffset: 10, device: 0 },
    ];
    const p = planBatch(columnsOf(ranges), limits);
    const reads = Array.from({ length: p.reads.length / 7 }, (_, i) => [...p.reads.subarray(i * 7, i * 7 + 3)]);
    assert.deepEqual(reads, [[0, 900_000, 10], [0, 100, 64 * KiB], [0, 100 + 64 * KiB, 36 * KiB]]);
    assert.deepEqual([...p.pieceRange], [0, 1, 1]);
  });

  test('parts split the sorted order: the same pieces as one plan, reads never across a part', () => {
    const next = rng(9);
    const ranges = Array.from({ length: 500 }, (_, i) => ({
      file: i % 2, fileOffset: Math.floor(next() * 400) * 4096, size: 4096 + (i % 3) * 2000, target: i % 3 === 0 ? 1 : 0, targetOffset: i * 8192, device: i % 3 === 0 ? 0 : -1,
    }));
    const whole = planBatch(columnsOf(ranges), limits);
    const parts = [...planParts(columnsOf(ranges), limits, 37)];
    assert.deepEqual(parts.flatMap((p) => [...p.pieceRange]), [...whole.pieceRange], 'same pieces in the same order');
    let left = whole.pieceRange.length;
    for (const [j, p] of parts.entries()) {
      assert.equal(p.pieceRange.length, Math.min(37 * 2 ** j, left), `part ${j}: twice the one before`);
      left -= p.pieceRange.length;
      // Every read's pieces are this part's own, and the tasks cover its reads.
      const nReads = p.reads.length / 7;
      assert.equal(p.readPieces[nReads], p.pieceRange.length);
      let covered = 0;
      for (let t = 0; t < p.tasks.length; t += 3) covered += p.tasks[t + 1]!;
      assert.equal(covered, nReads);
    }
    assert.ok(parts.reduce((n, p) => n + p.reads.length / 7, 0) >= whole.reads.length / 7, 'no read joins pieces of two parts');
    assert.equal([...planParts(columnsOf([]), limits)].length, 1, 'an empty batch is one empty part');
  });

  test('tasks share the reads out evenly, several per thread, none tiny', () => {
    const ranges = Array.from({ length: 1000 }, (_, i) => ({ file: 0, fileOffset: i * 1e6, size: 4096, target: 0, targetOffset: i * 4096, device: -1 }));
    const p = planBatch(columnsOf(ranges), limits);
    const n = p.tasks.length / 3;
    assert.equal(n, 16, '4 threads × 4');
    let sum = 0;
    for (let i = 0; i < n; i++) {
      assert.equal(p.tasks[i * 3], sum);
      sum += p.tasks[i * 3 + 1]!;
      assert.ok(Math.abs(p.tasks[i * 3 + 1]! - 1000 / 16) <= 1);
    }
    assert.equal(sum, 1000);
    const few = planBatch(columnsOf(ranges.slice(0, 20)), limits);
    assert.equal(few.tasks.length / 3, 1, '80 KiB is one task');
  });
});
