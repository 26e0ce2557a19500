/**
 * Every size: operations cut into at least as many tasks as there are threads (above a floor),
 * and small host reads done on the calling thread from the page cache, with the pool as the
 * fallback for anything that path cannot finish.
 */
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { configure, getConfig, open } from '../../src/index.js';
import { defaults } from '../../src/settings/config.js';
import {
  DEVICE_SCRATCH_MAX, DEVICE_TASK_FLOOR, GATHER_COPY, GATHER_MIN, GATHER_STAGE, GATHER_TASK, planDeviceRead, planGather, deviceReadTaskSize, deviceStageScratch, DIRECT_PIECE, HOST_STAGE_MIN, HOST_STAGE_PIECE, planWrite, poolSpinners, STAGE_PIECE_MIN, stagePiece, TASK_FLOOR,
  taskSizeFor, hostStagePiece, inlineDeviceSplit, INLINE_DEVICE_PIECE, INLINE_HELPED_PIECE, INLINE_MAX_HELPERS,
} from '../../src/plan/transfer-plan.js';
import { makeFile } from '../helpers.js';

const initial = getConfig();
after(() => configure(initial));
const KiB = 1024;
const MiB = 1024 * KiB;

describe('task sizes', () => {
  const s = (threads: number, taskSize = 4 * MiB) => ({ ...defaults(), threads, taskSize });

  test('mid-size operations are cut for every thread, never below the floor nor above taskSize', () => {
    assert.equal(taskSizeFor(s(16), 16 * MiB), 1 * MiB, '16 MiB over 16 threads');
    assert.equal(taskSizeFor(s(16), 256 * MiB), 4 * MiB, 'large reads keep taskSize');
    assert.equal(taskSizeFor(s(16), 1 * MiB), TASK_FLOOR, '1 MiB: tasks of the floor');
    assert.equal(taskSizeFor(s(16), 4 * KiB), TASK_FLOOR, 'one task');
    assert.equal(taskSizeFor(s(4, 64 * KiB), 16 * MiB), 64 * KiB, 'a taskSize below the floor is kept');
    for (const size of [3 * MiB + 7, 5 * MiB - 1, 777 * KiB]) {
      const t = taskSizeFor(s(4), size);
      assert.equal(t % 4096, 0, `${size}: page multiple`);
      assert.ok(Math.ceil(size / t) <= 4 && Math.ceil(size / t) >= Math.min(4, Math.floor(size / TASK_FLOOR)), `${size}: ${t}`);
    }
  });

  test('staged device reads: the general split, cut to about 8 tasks a thread for large reads but not below DEVICE_TASK_FLOOR', () => {
    assert.equal(deviceReadTaskSize(s(16), 256 * MiB), 2 * MiB, '256 MiB: a short tail of copies');
    assert.equal(deviceReadTaskSize(s(16), 1024 * MiB), 4 * MiB, 'large reads keep taskSize');
    assert.equal(deviceReadTaskSize(s(16), 16 * MiB), DEVICE_TASK_FLOOR, '16 MiB: one task a thread');
    assert.equal(deviceReadTaskSize(s(16), 1 * MiB), TASK_FLOOR, '1 MiB: four tasks, as the general split has it');
    assert.equal(deviceReadTaskSize(s(16), 4 * KiB), TASK_FLOOR);
    assert.equal(deviceReadTaskSize(s(4, 64 * KiB), 16 * MiB), 64 * KiB, 'a taskSize below the floor is kept');
    assert.equal(deviceReadTaskSize(s(16), 300 * MiB + 1) % 4096, 0);
  });

  test('buffered writes are cut for the writers that run at once', () => {
    const w = planWrite(s(16), false, 16 * MiB);
    assert.equal(w.maxRunners, 4);
    assert.equal(w.taskSize, 4 * MiB);
    assert.equal(planWrite(s(16), true, 16 * MiB).taskSize, 1 * MiB, 'O_DIRECT writes use every thread');
  });

  test('staged pieces: reads and O_DIRECT writes whole halves; buffered writes a quarter of a task, page multiples, within [floor, half]', () => {
    assert.equal(stagePiece(1 * MiB, 4 * MiB, false, false), 4 * MiB, 'reads: a whole half');
    assert.equal(stagePiece(4 * MiB, 4 * MiB, true, true), 4 * MiB, 'O_DIRECT writes: a whole half');
    assert.equal(stagePiece(4 * MiB, 4 * MiB, false, true), 1 * MiB);
    assert.equal(stagePiece(1 * MiB, 4 * MiB, false, true), 256 * KiB);
    assert.equal(stagePiece(TASK_FLOOR, 4 * MiB, false, true), STAGE_PIECE_MIN);
    assert.equal(stagePiece(64 * MiB, 4 * MiB, false, true), 4 * MiB, 'never past a half');
    assert.equal(stagePiece(4 * MiB, 1000, false, false), 4096, 'at least a page');
    for (const t of [777 * KiB, 3 * MiB + 4096, 5 * MiB]) assert.equal(stagePiece(t, 8 * MiB, false, true) % 4096, 0, `${t}`);
  });

  test('host reads go through scratch only from HOST_STAGE_MIN up, and only under hostStaging', () => {
    const on = { ...defaults(), hostStaging: true };
    assert.equal(hostStagePiece(on, 16 * MiB), 0);
    assert.equal(hostStagePiece(on, HOST_STAGE_MIN - 1), 0);
    assert.equal(hostStagePiece(on, HOST_STAGE_MIN), HOST_STAGE_PIECE);
    assert.equal(hostStagePiece({ ...on, hostStaging: false }, 1 << 30), 0);
    assert.ok(DIRECT_PIECE % 4096 === 0 && DIRECT_PIECE > 0);
  });

  test('staged buffered reads into the GPU go through scratch up to DEVICE_SCRATCH_MAX, never writes or O_DIRECT', () => {
    assert.equal(deviceStageScratch(1 * MiB, false, false), HOST_STAGE_PIECE);
    assert.equal(deviceStageScratch(DEVICE_SCRATCH_MAX, false, false), HOST_STAGE_PIECE);
    assert.equal(deviceStageScratch(DEVICE_SCRATCH_MAX + 4096, false, false), 0);
    assert.equal(deviceStageScratch(1 * MiB, true, false), 0, 'O_DIRECT reads go into aligned halves');
    assert.equal(deviceStageScratch(1 * MiB, false, true), 0, 'writes');
  });

  test('reads into the GPU from GATHER_MIN to GATHER_STAGE are gathered in small tasks; not writes, O_DIRECT or larger reads', () => {
    const g = planGather(16 * MiB, false, false);
    assert.deepEqual(g, { taskSize: GATHER_TASK, gatherCopy: GATHER_COPY });
    assert.ok(GATHER_TASK % 4096 === 0 && GATHER_TASK < GATHER_MIN, 'a gathered read is several tasks');
    assert.ok(GATHER_STAGE <= DEVICE_SCRATCH_MAX, 'only reads through scratch are gathered');
    assert.ok(planGather(GATHER_MIN, false, false));
    assert.ok(planGather(GATHER_STAGE, false, false));
    assert.equal(planGather(GATHER_MIN - 1, false, false), undefined);
    assert.equal(planGather(GATHER_STAGE + 4096, false, false), undefined);
    assert.equal(planGather(16 * MiB, true, false), undefined, 'O_DIRECT');
    assert.equal(planGather(16 * MiB, false, true), undefined, 'writes');
    assert.deepEqual(planDeviceRead(s(16), 16 * MiB, false, false), g);
    assert.deepEqual(planDeviceRead(s(16), 16 * MiB, false, true), { taskSize: deviceReadTaskSize(s(16), 16 * MiB), gatherCopy: 0 }, 'not beside a mapped share');
    assert.equal(planDeviceRead(s(16), 256 * MiB, false, false).gatherCopy, 0);
  });

  test('inline device reads: from two pieces a reader, spinning workers help, through scratch; below, the calling thread alone', () => {
    const helped = (helpers: number) => ({ piece: INLINE_HELPED_PIECE, helpers, scratch: true });
    const alone = { piece: INLINE_DEVICE_PIECE, helpers: 0, scratch: false };
    const most = INLINE_MAX_HELPERS;
    assert.deepEqual(inlineDeviceSplit(1 * MiB, 4, most), helped(most));
    assert.deepEqual(inlineDeviceSplit(4 * INLINE_HELPED_PIECE, 4, most), helped(1));
    assert.deepEqual(inlineDeviceSplit(6 * INLINE_HELPED_PIECE, 4, most), helped(2));
    assert.deepEqual(inlineDeviceSplit(4 * INLINE_HELPED_PIECE - 1, 4, most), alone);
    assert.deepEqual(inlineDeviceSplit(4096, 4, most), alone);
    assert.deepEqual(inlineDeviceSplit(1 * MiB, 1, most), helped(1), 'no more helpers than workers watching the queue');
    assert.deepEqual(inlineDeviceSplit(1 * MiB, 0, most), alone, 'none watching: alone');
    assert.deepEqual(inlineDeviceSplit(1 * MiB, 4), helped(INLINE_MAX_HELPERS), 'the default maximum');
    assert.deepEqual(inlineDeviceSplit(1 * MiB, 4, 0), alone, 'none allowed: alone');
  });

  test('write scratch only beside other writers: not for one runner, not for a one-task write', () => {
    assert.ok(planWrite(s(16), false, 16 * MiB).writePiece > 0);
    assert.equal(planWrite(s(16), false, TASK_FLOOR).writePiece, 0, 'one task');
    assert.equal(planWrite({ ...s(16), writeThreads: 1 }, false, 16 * MiB).writePiece, 0, 'one writer');
    assert.equal(planWrite({ ...s(16), hostStaging: false }, false, 16 * MiB).writePiece, 0);
  });

  test('pool threads that watch the queue: a quarter of the cores, 1 to 4, never more than the threads', () => {
    assert.equal(poolSpinners(16, 16), 4);
    assert.equal(poolSpinners(16, 2), 1);
    assert.equal(poolSpinners(2, 64), 2);
    assert.equal(poolSpinners(16, 128), 4);
  });

  test('a 16 MiB read with 16 threads is 16 tasks, byte-exact', async () => {
    configure({ threads: 16, taskSize: 4 * MiB });
    const { file, data } = makeFile(16 * MiB + 3);
    await using f = await open(file);
    const target = Buffer.alloc(16 * MiB, 0xee);
    const rec = await f.readRecorded(target, { fileOffset: 3 });
    assert.equal(rec.tasks, 16);
    assert.equal(rec.bytes, 16 * MiB);
    assert.ok(target.equals(data.subarray(3)));
    configure(initial);
  });
});

describe('small reads on the calling thread', () => {
  test('a cached 4 KiB read is done inline, byte-exact, and recorded as posix-host', async () => {
    const { file, data } = makeFile(1 * MiB);
    await using f = await open(file);
    const target = Buffer.alloc(4096 + 2, 0xee);
    const rec = await f.readRecorded(target, { fileOffset: 12345, targetOffset: 1, size: 4096 });
    assert.deepEqual([rec.way, rec.fallbacks, rec.direct], [{ kind: 'inline-host' }, [], false]);
    assert.equal(rec.route, 'posix-host');
    assert.equal(rec.bytes, 4096);
    assert.ok(target.subarray(1, 4097).equals(data.subarray(12345, 12345 + 4096)));
    assert.equal(target[0], 0xee);
    assert.equal(target[4097], 0xee);
    assert.equal(f.stats().routes['posix-host'].operations, 1);
    assert.equal(f.stats().routes['posix-host'].bytes, 4096);
  });

  test('into SharedArrayBuffer, DataView and typed arrays of wider elements', async () => {
    const { file, data } = makeFile(64 * KiB);
    await using f = await open(file);
    const sab = new SharedArrayBuffer(8192);
    assert.equal((await f.readRecorded(sab, { fileOffset: 100, size: 8192 })).way.kind, 'inline-host');
    assert.ok(Buffer.from(sab).equals(data.subarray(100, 8292)));
    const wide = new Float64Array(new ArrayBuffer(16 * 1024), 8, 1024);
    assert.equal(await f.read(wide, { fileOffset: 5 }), 8192);
    assert.ok(Buffer.from(wide.buffer, 8, 8192).equals(data.subarray(5, 8197)));
    const view = new DataView(new ArrayBuffer(300), 10, 200);
    assert.equal(await f.read(view, { fileOffset: 7 }), 200);
    assert.ok(Buffer.from(view.buffer, 10, 200).equals(data.subarray(7, 207)));
  });

  test('a read that reaches end of file goes to the pool, which says how much exists', async () => {
    const { file, data } = makeFile(5000);
    await using f = await open(file);
    const target = Buffer.alloc(4096, 0xee);
    const rec = await f.readRecorded(target, { fileOffset: 4000 });
    assert.equal(rec.way.kind, 'pool-host');
    assert.equal(rec.bytes, 1000);
    assert.ok(target.subarray(0, 1000).equals(data.subarray(4000)));
    assert.ok(target.subarray(1000).every((b) => b === 0xee), 'past end of file untouched');
  });

  test('reads larger than the inline limit, and O_DIRECT reads, use the pool', async () => {
    const { file, data } = makeFile(1 * MiB);
    await using f = await open(file);
    const limit = 64 * KiB;
    const atLimit = Buffer.alloc(limit);
    assert.equal((await f.readRecorded(atLimit)).way.kind, 'inline-host', 'the default limit covers 64 KiB');
    configure({ inlineReadMax: limit });
    const big = Buffer.alloc(limit + 4096);
    try {
      const rec = await f.readRecorded(big);
      assert.equal(rec.way.kind, 'pool-host');
      assert.ok(big.equals(data.subarray(0, big.length)));
      assert.equal((await f.readRecorded(atLimit)).way.kind, 'inline-host', 'the limit itself is inline');
      configure({ inlineReadMax: 0 });
      assert.equal((await f.readRecorded(atLimit)).way.kind, 'pool-host', '0: never inline');
      assert.ok(atLimit.equals(data.subarray(0, limit)));
    } finally {
      configure({ inlineReadMax: initial.inlineReadMax });
    }
    configure({ directIoRead: true });
    try {
      const small = Buffer.alloc(4096);
      assert.equal((await f.readRecorded(small, { fileOffset: 8192 })).way.kind, 'pool-host');
      assert.ok(small.equals(data.subarray(8192, 12288)));
    } finally {
      configure({ directIoRead: initial.directIoRead });
    }
  });

  test('progress arrives after the call returns', async () => {
    const { file } = makeFile(64 * KiB);
    await using f = await open(file);
    const seen: number[] = [];
    const p = f.readRecorded(Buffer.alloc(4096), { onProgress: (n) => seen.push(n) });
    assert.deepEqual(seen, []);
    assert.equal((await p).way.kind, 'inline-host');
    assert.deepEqual(seen, [4096]);
  });
});
