/**
 * Bad input through the public API: sizes and offsets come from the engine, never from
 * properties; memory that can change size or move is refused or kept in place; every refusal
 * is a typed error that leaves the file and the caller's data untouched.
 */
import { useFakeDriver, makeFile, newPath } from '../helpers.js';
useFakeDriver();

import assert from 'node:assert/strict';
import fs from 'node:fs';
import { afterEach, describe, test } from 'node:test';
const p = await import('../../src/index.js');
const { DeviceBuffer, PinnedBuffer, configure, getConfig, open, readFileToHost, writeFile } = p;
const { pageCacheResidency, dropPageCache } = await import('../../src/measure.js');

const initial = getConfig();
// Every test starts from the same settings, whether the one before it passed or threw.
afterEach(() => configure(initial));

const { file, data } = makeFile(1 << 20);

/** Asserts that `fn` rejects (or throws) with a penstock error of `code`. */
async function rejectsWith(fn: () => unknown, code: string | RegExp): Promise<void> {
  await assert.rejects(
    async () => fn(),
    (e: Error & { code?: string }) => {
      assert.ok(e instanceof p.PenstockError, `not a PenstockError: ${e.name}: ${e.message}`);
      if (typeof code === 'string') assert.equal(e.code, code, e.message);
      else assert.match(e.code!, code, e.message);
      return true;
    },
  );
}

describe('bounds come from the engine, not from properties', () => {
  test('a Uint8Array with an own byteLength of 8 MiB is read by its real 16 bytes', async () => {
    await using f = await open(file);
    const target = new Uint8Array(16);
    Object.defineProperty(target, 'byteLength', { value: 8 << 20 });
    assert.equal(await f.read(target), 16);
    assert.deepEqual(Buffer.from(target), data.subarray(0, 16));
  });

  test('a subclass whose byteLength getter lies is read by its real size', async () => {
    class Liar extends Uint8Array {
      override get byteLength(): number {
        return 8 << 20;
      }
    }
    await using f = await open(file);
    const target = new Liar(32);
    assert.equal(await f.read(target), 32);
    assert.deepEqual(Buffer.from(target.buffer), data.subarray(0, 32));
  });

  test('an ArrayBuffer with an own byteLength is read by its real size, and a write discloses nothing past it', async () => {
    await using f = await open(file);
    const ab = new ArrayBuffer(16);
    Object.defineProperty(ab, 'byteLength', { value: 64 << 10 });
    assert.equal(await f.read(ab), 16);
    const out = newPath('liar');
    await using w = await open(out, 'w');
    const src = new ArrayBuffer(8);
    new Uint8Array(src).fill(7);
    Object.defineProperty(src, 'byteLength', { value: 64 << 10 });
    assert.equal(await w.write(src), 8);
    assert.deepEqual(fs.readFileSync(out), Buffer.alloc(8, 7));
  });

  test('a DataView with a shadowed byteOffset writes where the view really is', async () => {
    await using f = await open(file);
    const backing = new Uint8Array(64).fill(0xee);
    const view = new DataView(backing.buffer, 16, 16);
    Object.defineProperty(view, 'byteOffset', { value: 1 << 30 });
    Object.defineProperty(view, 'buffer', { value: new ArrayBuffer(1 << 20) });
    assert.equal(await f.read(view), 16);
    assert.deepEqual(Buffer.from(backing.subarray(16, 32)), data.subarray(0, 16));
    assert.ok(backing.subarray(0, 16).every((b) => b === 0xee) && backing.subarray(32).every((b) => b === 0xee));
  });

  test('a range past the real end of the memory is refused, even when the properties allow it', async () => {
    await using f = await open(file);
    const target = new Uint8Array(16);
    Object.defineProperty(target, 'byteLength', { value: 1 << 20 });
    await rejectsWith(() => f.read(target, { size: 1 << 20 }), 'ERR_PENSTOCK_OUT_OF_RANGE');
  });

  test('native code checks the host range against the memory itself, and parses its spec strictly', async () => {
    const { native } = await import('../../src/addon/binding.js');
    const fd = fs.openSync(file, 'r');
    try {
      const spec = {
        write: false, route: 'posix-host', fd, directFd: -1, fileOffset: 0, size: 16, taskSize: 4096,
        maxRunners: 0, writePiece: 0, host: new Uint8Array(16), hostOffset: 0, hostStagePiece: 0, directPiece: 0,
      } as const;
      const code = (f: () => unknown) => {
        try {
          f();
          return 'none';
        } catch (e) {
          return (p.PenstockError && (e as { record?: { code: string } }).record?.code) ?? String(e);
        }
      };
      assert.equal(code(() => native().submit({ ...spec, hostOffset: 8 })), 'ERR_PENSTOCK_OUT_OF_RANGE');
      assert.equal(code(() => native().submit({ ...spec, size: 17 })), 'ERR_PENSTOCK_OUT_OF_RANGE');
      assert.equal(code(() => native().submit({ ...spec, hostOffset: -1 })), 'ERR_PENSTOCK_INVALID_ARGUMENT');
      assert.equal(code(() => native().submit({ ...spec, size: 2 ** 64 })), 'ERR_PENSTOCK_INVALID_ARGUMENT');
      assert.equal(code(() => native().submit({ ...spec, extra: 1 } as never)), 'ERR_PENSTOCK_INVALID_ARGUMENT');
      // Task indexes are 32-bit (task_claims.h): a plan cutting more tasks than that is refused.
      assert.equal(code(() => native().submit({ ...spec, size: 2 ** 33, taskSize: 1 })), 'ERR_PENSTOCK_INVALID_ARGUMENT');
      const { hostStagePiece: _, ...missing } = spec;
      assert.equal(code(() => native().submit(missing as never)), 'ERR_PENSTOCK_INVALID_ARGUMENT');
      // A plan that opens O_DIRECT must size its pieces: native code assumes none.
      const direct = fs.openSync(file, 'r');
      try {
        assert.equal(code(() => native().submit({ ...spec, directFd: direct })), 'ERR_PENSTOCK_INVALID_ARGUMENT');
      } finally {
        fs.closeSync(direct);
      }
      assert.equal(code(() => native().residency(fd, -1, 10, 4)), 'ERR_PENSTOCK_INVALID_ARGUMENT');
      assert.equal(code(() => native().setThreads(0.5, 0, 0)), 'ERR_PENSTOCK_INVALID_ARGUMENT');
      assert.equal(code(() => native().setThreads(2, -1, 0)), 'ERR_PENSTOCK_INVALID_ARGUMENT');
      assert.equal(code(() => (native().setThreads as (n: number) => void)(2)), 'ERR_PENSTOCK_INVALID_ARGUMENT');
      assert.equal(code(() => native().deviceFree(0, 5 as never)), 'ERR_PENSTOCK_INVALID_ARGUMENT');
      assert.equal(code(() => native().pinnedAlloc(-1)), 'ERR_PENSTOCK_INVALID_ARGUMENT');
      // Own keys only, each read once: inherited keys are missing, a long key is unknown, a getter runs once.
      assert.equal(code(() => native().submit(Object.create(spec))), 'ERR_PENSTOCK_INVALID_ARGUMENT');
      assert.equal(code(() => native().submit({ ...spec, ['x'.repeat(200)]: 1 } as never)), 'ERR_PENSTOCK_INVALID_ARGUMENT');
      let reads = 0;
      const counted = Object.defineProperty({ ...spec }, 'size', { enumerable: true, get: () => (reads++, 16) });
      assert.equal((await native().submit(counted).promise).bytes, 16);
      assert.equal(reads, 1);
      assert.equal((await native().submit({ ...spec, [Symbol('s')]: 1 }).promise).bytes, 16, 'symbol keys are not spec keys');
      const ok = native().submit(spec);
      const other = native().submit(spec);
      // One cancel function serves every handle, by the handle's id; anything else it ignores.
      assert.equal(ok.cancel, other.cancel);
      assert.notEqual(ok.id, other.id);
      assert.throws(() => Object.assign(ok, { id: other.id }), TypeError, 'the id a handle is cancelled by is read-only');
      assert.doesNotThrow(() => ok.cancel.call(undefined as never));
      assert.doesNotThrow(() => ok.cancel.call({ id: 'x' } as never));
      assert.doesNotThrow(() => ok.cancel.call({ id: -1 } as never));
      assert.equal((await ok.promise).bytes, 16);
      assert.equal((await other.promise).bytes, 16);
      ok.cancel(); // settled: nothing left to cancel
    } finally {
      fs.closeSync(fd);
    }
  });
});

describe('memory that could change size or move', () => {
  test('resizable ArrayBuffers and growable SharedArrayBuffers are refused, the file left alone', async () => {
    await using f = await open(file);
    const rab: ArrayBuffer = Reflect.construct(ArrayBuffer, [4096, { maxByteLength: 1 << 28 }]);
    await rejectsWith(() => f.read(rab), 'ERR_PENSTOCK_RESIZABLE_BUFFER');
    await rejectsWith(() => f.read(new Uint8Array(rab)), 'ERR_PENSTOCK_RESIZABLE_BUFFER');
    const gsab: SharedArrayBuffer = Reflect.construct(SharedArrayBuffer, [4096, { maxByteLength: 1 << 20 }]);
    await rejectsWith(() => f.read(gsab), 'ERR_PENSTOCK_RESIZABLE_BUFFER');
    const out = newPath('resizable');
    fs.writeFileSync(out, 'keep');
    await rejectsWith(() => writeFile(out, rab), 'ERR_PENSTOCK_RESIZABLE_BUFFER');
    assert.equal(fs.readFileSync(out, 'utf8'), 'keep');
  });

  test('a target cannot be transferred away while a read into it runs', async () => {
    configure({ threads: 1, taskSize: 4096 });
    try {
      await using f = await open(file);
      const ab = new ArrayBuffer(1 << 20);
      const reading = f.read(ab);
      const moved = structuredClone(ab, { transfer: [ab] });
      assert.equal(ab.byteLength, 1 << 20, 'the buffer was detached under the read');
      assert.equal(await reading, 1 << 20);
      assert.deepEqual(Buffer.from(ab), data);
      assert.equal(moved.byteLength, 1 << 20);
    } finally {
      configure({ threads: initial.threads, taskSize: initial.taskSize });
    }
  });

  test('fixed-length SharedArrayBuffers work as targets and sources, bare or through views', async () => {
    await using f = await open(file);
    const sab = new SharedArrayBuffer(4096);
    assert.equal(await f.read(sab), 4096);
    assert.deepEqual(Buffer.from(sab), data.subarray(0, 4096));
    const view = new Uint8Array(new SharedArrayBuffer(8192), 4096, 100);
    assert.equal(await f.read(view, { fileOffset: 10 }), 100);
    assert.deepEqual(Buffer.from(view), data.subarray(10, 110));
    const out = newPath('sab');
    assert.equal(await writeFile(out, sab), 4096);
    assert.deepEqual(fs.readFileSync(out), data.subarray(0, 4096));
    const dev = DeviceBuffer.alloc(4096);
    await dev.copyFrom(sab);
    const back = new SharedArrayBuffer(4096);
    await dev.copyTo(back);
    assert.deepEqual(Buffer.from(back), data.subarray(0, 4096));
    dev.free();
  });
});

describe('typed errors for bad arguments', () => {
  test('null or non-object options are refused with a code', async () => {
    await using f = await open(file, 'r+');
    const b = Buffer.alloc(16);
    await rejectsWith(() => f.read(b, null as never), 'ERR_PENSTOCK_INVALID_ARGUMENT');
    await rejectsWith(() => f.write(b, null as never), 'ERR_PENSTOCK_INVALID_ARGUMENT');
    await rejectsWith(() => f.read(b, 5 as never), 'ERR_PENSTOCK_INVALID_ARGUMENT');
    await rejectsWith(() => f.read(b, { size: -1 }), 'ERR_PENSTOCK_INVALID_ARGUMENT');
    await rejectsWith(() => f.read(b, { fileOffset: 0.5 }), 'ERR_PENSTOCK_INVALID_ARGUMENT');
  });

  test("open() refuses '__proto__', 'toString' and other inherited names as flags", async () => {
    for (const flags of ['__proto__', 'toString', 'constructor', 'hasOwnProperty'])
      await rejectsWith(() => open(file, flags as never), 'ERR_PENSTOCK_INVALID_ARGUMENT');
  });

  test('what is not memory is refused with a code, naming SharedArrayBuffer among the kinds', async () => {
    await using f = await open(file);
    for (const bad of [null, 5, 'text', {}, [1, 2, 3]]) {
      await assert.rejects(f.read(bad as never), (e: Error & { code?: string }) => {
        assert.equal(e.code, 'ERR_PENSTOCK_INVALID_BUFFER');
        assert.match(e.message, /SharedArrayBuffer/);
        return true;
      });
    }
  });

  test('writeFile() leaves the file untouched for a source that is not memory, or freed memory', async () => {
    const out = newPath('keep');
    fs.writeFileSync(out, 'precious');
    await rejectsWith(() => writeFile(out, {} as never), 'ERR_PENSTOCK_INVALID_BUFFER');
    const dev = DeviceBuffer.alloc(16);
    dev.free();
    await rejectsWith(() => writeFile(out, dev), 'ERR_PENSTOCK_FREED');
    const pin = PinnedBuffer.alloc(16);
    pin.free();
    await rejectsWith(() => writeFile(out, pin), 'ERR_PENSTOCK_FREED');
    assert.equal(fs.readFileSync(out, 'utf8'), 'precious');
  });
});

describe('whole files', () => {
  test('files that report a size of 0 but have content are read to their end', async () => {
    const expected = fs.readFileSync('/proc/self/cmdline');
    assert.ok(expected.length > 0);
    const got = await readFileToHost('/proc/self/cmdline');
    assert.deepEqual(got, expected);
    const pinned = await readFileToHost('/proc/self/cmdline', { pinned: true });
    assert.deepEqual(Buffer.from(pinned.bytes), expected);
    pinned.free();
    // Longer than the first read, so the reads must continue.
    const maps = await readFileToHost('/proc/self/maps');
    assert.ok(maps.length > 64 * 1024 || maps.toString().split('\n').length > 10);
    assert.match(maps.toString(), /\[stack\]/);
  });

  test('an empty file gives empty buffers, pinned or not', async () => {
    const empty = newPath('empty');
    fs.writeFileSync(empty, '');
    assert.equal((await readFileToHost(empty)).length, 0);
    const pinned = await readFileToHost(empty, { pinned: true });
    assert.equal(pinned.byteLength, 0);
    assert.equal(pinned.bytes.length, 0);
    pinned.free();
  });
});

describe('page-cache residency', () => {
  test('pages past the end of the file do not count as cold', async () => {
    const { file: small } = makeFile(256 << 10);
    fs.readFileSync(small); // cached
    const whole = await pageCacheResidency(small);
    assert.equal(whole, 1);
    assert.equal(await pageCacheResidency(small, { size: 256 << 20 }), 1, 'a range larger than the file looked cold');
    assert.equal(await pageCacheResidency(small, { offset: 1 << 30, size: 4096 }), -1);
  });

  test('offset and size are validated; a missing file is a PenstockSystemError', async () => {
    await rejectsWith(() => pageCacheResidency(file, { offset: -1 }), 'ERR_PENSTOCK_INVALID_ARGUMENT');
    await rejectsWith(() => pageCacheResidency(file, { offset: 1.5 }), 'ERR_PENSTOCK_INVALID_ARGUMENT');
    await rejectsWith(() => pageCacheResidency(file, { size: '10' as never }), 'ERR_PENSTOCK_INVALID_ARGUMENT');
    for (const fn of [() => pageCacheResidency('/nonexistent/x'), () => dropPageCache('/nonexistent/x')]) {
      await assert.rejects(fn(), (e: Error & { code?: string; syscall?: string }) => {
        assert.ok(e instanceof p.PenstockSystemError, `${e.name}: ${e.message}`);
        assert.equal(e.code, 'ENOENT');
        return true;
      });
    }
  });

  test("a read larger than its file is planned on the file's own cache state", async () => {
    configure({ directIoRead: 'auto' });
    try {
      const { file: big } = makeFile(80 << 20);
      await dropPageCache(big);
      // The first 48 MiB cached, the rest not: 60% of the file is in the cache.
      const fd = fs.openSync(big, 'r');
      fs.readSync(fd, Buffer.alloc(48 << 20), 0, 48 << 20, 0);
      fs.closeSync(fd);
      await using f = await open(big);
      const small = await f.readRecorded(Buffer.alloc(80 << 20));
      const large = await f.readRecorded(Buffer.alloc(256 << 20));
      assert.equal(small.bytes, 80 << 20);
      assert.equal(large.bytes, 80 << 20);
      assert.equal(large.direct, small.direct, 'the target size changed the plan');
    } finally {
      configure({ directIoRead: initial.directIoRead });
    }
  });
});

