/** The host path for real: parallel pread/pwrite into and from JS memory, checked byte for byte. */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { afterEach, describe, test } from 'node:test';
import { configure, getConfig, open, readFileToHost, writeFile, PenstockSystemError } from '../../src/index.js';
import { stats, resetStats, pageCacheResidency, dropPageCache } from '../../src/measure.js';
import { dropPagesOrSkip, machineWith, makeFile, newPath, pattern, tmpDir } from '../helpers.js';
import { splitDev, storageOf } from '../../src/system/block-device.js';
import { SysRoot } from '../../src/system/sysfs.js';
import { coldReadsDirect } from '../../src/plan/transfer-plan.js';

const initial = getConfig();
// Every test starts from the same settings, whether the one before it passed or threw.
afterEach(() => configure(initial));

describe('host reads', () => {
  const sizes = [0, 1, 4095, 4096, 4097, 65536 + 3, (1 << 20) - 1, 3 * (1 << 20) + 17, 9 * (1 << 20)];
  for (const taskSize of [4096, 64 * 1024, 1 << 20, 4 << 20]) {
    for (const threads of [1, 3, 8]) {
      test(`sizes × offsets, task ${taskSize}, threads ${threads}`, async () => {
        configure({ taskSize, threads });
        const { file, data } = makeFile(9 * (1 << 20) + 5);
        await using f = await open(file);
        for (const size of sizes) {
          for (const off of [0, 1, 4095, 12345]) {
            const target = Buffer.alloc(size + 7, 0xee);
            const n = await f.read(target, { fileOffset: off, targetOffset: 3, size });
            const expect = Math.max(0, Math.min(size, data.length - off));
            assert.equal(n, expect, `bytes for size ${size} at ${off}`);
            assert.ok(target.subarray(3, 3 + n).equals(data.subarray(off, off + n)), `data for size ${size} at ${off}`);
            assert.ok(target.subarray(0, 3).every((b) => b === 0xee), 'bytes before targetOffset untouched');
            assert.ok(target.subarray(3 + n).every((b) => b === 0xee), 'bytes after the read untouched');
          }
        }
      });
    }
  }

  test('reads straight into the target (hostStaging off) match too, up to end of file', async () => {
    configure({ taskSize: 4 << 20, threads: 4, hostStaging: false });
    try {
      const { file, data } = makeFile(9 * (1 << 20) + 5);
      await using f = await open(file);
      for (const off of [0, 3, data.length - (2 << 20)]) {
        const target = Buffer.alloc(9 << 20, 0xee);
        const n = await f.read(target, { fileOffset: off });
        assert.equal(n, Math.min(target.length, data.length - off));
        assert.ok(target.subarray(0, n).equals(data.subarray(off, off + n)));
        assert.ok(target.subarray(n).every((b) => b === 0xee));
      }
    } finally {
      configure({ hostStaging: true });
    }
  });

  test('reads through scratch and streaming stores (hostStagePiece) match, to the end of the file, with progress', async () => {
    // The plan uses scratch only from 64 MiB up: the addon is driven with its pieces directly.
    const { native } = await import('../../src/addon/binding.js');
    const { ensurePool } = await import('../../src/addon/runtime.js');
    const size = 3 * (1 << 20) + 12345;
    const { file, data } = makeFile(size);
    ensurePool();
    const fd = fs.openSync(file, 'r');
    try {
      for (const [hostStagePiece, fileOffset, want] of [[4096, 0, size], [64 * 1024, 5, size - 5], [100_000, size - 70_000, 70_000 + 8192]] as const) {
        const target = Buffer.alloc(size + 8192, 0xee);
        let progress = 0;
        const r = await native().submit({
          route: 'posix-host', write: false, fd, directFd: -1, fileOffset, size: want, taskSize: 1 << 20, maxRunners: 0, writePiece: 0,
          host: target, hostOffset: 3, hostStagePiece, directPiece: 0, progress: (n) => (progress = n),
        }).promise;
        const got = Math.min(want, size - fileOffset);
        assert.equal(r.bytes, got, `bytes with pieces of ${hostStagePiece}`);
        assert.equal(r.routeShare.bytes, got, `counted bytes with pieces of ${hostStagePiece}`);
        assert.equal(progress, got, `progress with pieces of ${hostStagePiece}`);
        assert.ok(target.subarray(3, 3 + got).equals(data.subarray(fileOffset, fileOffset + got)), `data with pieces of ${hostStagePiece}`);
        assert.ok(target.subarray(0, 3).every((b) => b === 0xee) && target.subarray(3 + got).every((b) => b === 0xee), 'around the read untouched');
      }
    } finally {
      fs.closeSync(fd);
    }
  });

  test('end of file returns the bytes that exist, never garbage', async () => {
    configure({ taskSize: 4096, threads: 4 });
    const { file, data } = makeFile(10000);
    await using f = await open(file);
    const target = Buffer.alloc(50000, 0x11);
    assert.equal(await f.read(target), 10000);
    assert.ok(target.subarray(0, 10000).equals(data));
    assert.ok(target.subarray(10000).every((b) => b === 0x11));
    assert.equal(await f.read(target, { fileOffset: 10000 }), 0);
    assert.equal(await f.read(target, { fileOffset: 1e12 }), 0);
  });

  test('typed arrays, DataView and ArrayBuffer targets', async () => {
    configure({ taskSize: 1 << 20, threads: 4 });
    const { file, data } = makeFile(3 << 20);
    await using f = await open(file);
    const f64 = new Float64Array((3 << 20) / 8);
    assert.equal(await f.read(f64), 3 << 20);
    assert.ok(Buffer.from(f64.buffer).equals(data));
    const ab = new ArrayBuffer(1000);
    assert.equal(await f.read(new DataView(ab, 10, 500), { fileOffset: 7 }), 500);
    assert.ok(Buffer.from(ab, 10, 500).equals(data.subarray(7, 507)));
    const whole = new ArrayBuffer(64);
    assert.equal(await f.read(whole, { fileOffset: 64 }), 64);
    assert.ok(Buffer.from(whole).equals(data.subarray(64, 128)));
  });

  test('many concurrent reads of one and several files', async () => {
    configure({ taskSize: 64 * 1024, threads: 6 });
    const files = [makeFile(2 << 20), makeFile(1 << 20), makeFile(777777)];
    const handles = await Promise.all(files.map((x) => open(x.file)));
    const jobs: Promise<void>[] = [];
    for (let i = 0; i < 30; i++) {
      const k = i % files.length;
      const { data } = files[k]!;
      const off = (i * 9973) % data.length;
      const size = Math.min(200000 + i * 1000, data.length - off);
      jobs.push(
        (async () => {
          const b = Buffer.alloc(size);
          assert.equal(await handles[k]!.read(b, { fileOffset: off }), size);
          assert.ok(b.equals(data.subarray(off, off + size)));
        })(),
      );
    }
    await Promise.all(jobs);
    await Promise.all(handles.map((h) => h.close()));
  });
});

describe('host writes', () => {
  test('writes at offsets, unaligned, across task sizes, then reads back', async () => {
    for (const taskSize of [4096, 1 << 20]) {
      configure({ taskSize, threads: 5 });
      const file = newPath('w');
      const data = pattern(5 * (1 << 20) + 333, 7);
      await using f = await open(file, 'w+');
      assert.equal(await f.write(data.subarray(0, 1000), { fileOffset: 0 }), 1000);
      assert.equal(await f.write(data, { fileOffset: 0, sourceOffset: 1000, size: data.length - 1000 }), data.length - 1000);
      const expect = Buffer.concat([data.subarray(1000)]);
      const back = fs.readFileSync(file);
      assert.equal(back.length, data.length - 1000);
      assert.ok(back.equals(expect));
      const piece = Buffer.alloc(12345);
      assert.equal(await f.read(piece, { fileOffset: 4097 }), 12345);
      assert.ok(piece.equals(expect.subarray(4097, 4097 + 12345)));
    }
  });

  test('writeFile and readFileToHost round trip', async () => {
    configure({ taskSize: 1 << 20, threads: 4 });
    const file = newPath('wf');
    const data = pattern(3 * (1 << 20) + 1, 9);
    assert.equal(await writeFile(file, data), data.length);
    const back = await readFileToHost(file);
    assert.ok(back.equals(data));
    assert.equal((await readFileToHost(newEmpty())).length, 0);
  });
});

function newEmpty(): string {
  const p = newPath('empty');
  fs.writeFileSync(p, '');
  return p;
}

describe('O_DIRECT', () => {
  test('direct reads and writes with unaligned heads and tails match buffered results', async (t) => {
    const probe = newPath('probe');
    fs.writeFileSync(probe, 'x');
    try {
      fs.closeSync(fs.openSync(probe, fs.constants.O_RDONLY | fs.constants.O_DIRECT));
    } catch {
      t.skip(`O_DIRECT is not supported on ${tmpDir()}`);
      return;
    }
    configure({ taskSize: 1 << 20, threads: 4, directIoRead: true, directIoWrite: true });
    try {
      const { file, data } = makeFile(6 * (1 << 20) + 1234);
      await using f = await open(file);
      for (const [off, size] of [[0, data.length], [1, 4095], [4095, 2], [4096, 4096], [12345, 3 << 20], [data.length - 10, 100]] as const) {
        const b = Buffer.alloc(size, 0x5a);
        const n = await f.read(b, { fileOffset: off });
        const expect = Math.max(0, Math.min(size, data.length - off));
        assert.equal(n, expect);
        assert.ok(b.subarray(0, n).equals(data.subarray(off, off + n)));
        assert.ok(b.subarray(n).every((x) => x === 0x5a));
      }
      assert.equal(f.route.directIo, undefined, 'O_DIRECT was used, not refused');
      const out = newPath('direct-w');
      await using w = await open(out, 'w+');
      const src = pattern(5 * (1 << 20) + 77, 3);
      assert.equal(await w.write(src, { fileOffset: 0 }), src.length);
      assert.equal(await w.write(src.subarray(0, 5000), { fileOffset: 4093 }), 5000);
      const expect = Buffer.from(src);
      src.subarray(0, 5000).copy(expect, 4093);
      assert.ok(fs.readFileSync(out).equals(expect));
    } finally {
      configure({ directIoRead: 'auto', directIoWrite: false });
    }
  });
});

describe("directIoRead 'auto'", () => {
  test('large cold ranges bypass the page cache on an NVMe drive, not on other disks; warm and small ones never', async (t) => {
    const { file, data } = makeFile(70 << 20);
    try {
      fs.closeSync(fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_DIRECT));
    } catch {
      t.skip('O_DIRECT is not supported here');
      return;
    }
    configure({ directIoRead: 'auto', taskSize: 4 << 20, threads: 4, systemRoot: machineWith(file, 'nvme0n1', false) });
    await using f = await open(file);
    const target = Buffer.alloc(70 << 20);
    assert.ok((await pageCacheResidency(file)) > 0.9, 'just written: cached');
    const warm = await f.readRecorded(target, { fileOffset: 1 });
    assert.equal(warm.direct, false);
    assert.equal(f.route.coldReads, undefined, 'no cold read yet');
    if (!(await dropPagesOrSkip(t, file))) return;
    target.fill(0);
    const cold = await f.readRecorded(target, { fileOffset: 1 });
    assert.equal(cold.direct, true);
    assert.equal(cold.tasks, Math.ceil(cold.bytes / (4 << 20)), 'O_DIRECT: tasks of the task size, claimed in turn');
    assert.deepEqual(f.route.coldReads, { device: 'nvme0n1', direct: true });
    assert.equal(cold.bytes, data.length - 1);
    assert.ok(target.subarray(0, cold.bytes).equals(data.subarray(1)));
    await dropPageCache(file);
    const small = await f.readRecorded(Buffer.alloc(1 << 20));
    assert.equal(small.direct, false, 'small reads stay buffered');

    // The same file on a disk that is not NVMe (a virtio disk): the page cache's readahead.
    configure({ systemRoot: machineWith(file, 'vda', true) });
    await using g = await open(file);
    await dropPageCache(file);
    target.fill(0);
    const buffered = await g.readRecorded(target, { fileOffset: 1 });
    assert.equal(buffered.direct, false);
    assert.equal(buffered.tasks, 4, 'one stripe per worker');
    assert.deepEqual(g.route.coldReads, { device: 'vda', direct: false });
    assert.ok(target.subarray(0, buffered.bytes).equals(data.subarray(1)));
  });

  test('the storage under a file: partitions read their drive, no block device is none', () => {
    assert.deepEqual(splitDev(0x0fd00), { major: 253, minor: 0 });
    // makedev(259, 300): minor bits above 8 sit at bit 20.
    assert.deepEqual(splitDev((259 << 8) | (300 & 0xff) | ((300 & ~0xff) << 12)), { major: 259, minor: 300 });
    const root = tmpDir() + '/root-partition';
    fs.mkdirSync(`${root}/sys/devices/pci/nvme/nvme1n1/nvme1n1p2`, { recursive: true });
    fs.writeFileSync(`${root}/sys/devices/pci/nvme/nvme1n1/nvme1n1p2/partition`, '2\n');
    fs.mkdirSync(`${root}/sys/devices/pci/nvme/nvme1n1/queue`, { recursive: true });
    fs.writeFileSync(`${root}/sys/devices/pci/nvme/nvme1n1/queue/rotational`, '0\n');
    fs.mkdirSync(`${root}/sys/dev/block`, { recursive: true });
    fs.symlinkSync('../../devices/pci/nvme/nvme1n1/nvme1n1p2', `${root}/sys/dev/block/259:2`);
    const sys = new SysRoot(root);
    const nvme = storageOf(259 * 256 + 2, sys);
    assert.deepEqual(nvme, { device: 'nvme1n1', rotational: false, nvme: true });
    assert.equal(coldReadsDirect(nvme), true);
    assert.equal(storageOf(0x2f, sys), undefined, 'major 0 (tmpfs, NFS): no block device');
    assert.equal(storageOf(8 * 256, sys), undefined, 'not shown by sysfs');
    assert.equal(coldReadsDirect(undefined), false);
    assert.equal(coldReadsDirect({ device: 'sda', rotational: false, nvme: false }), false);
  });
});

describe('stats', () => {
  test('tasks are counted under posix-host per file and process-wide', async () => {
    configure({ taskSize: 1 << 20, threads: 4 });
    resetStats();
    const { file } = makeFile(10 * (1 << 20) + 1);
    await using f = await open(file);
    await f.read(Buffer.alloc(10 * (1 << 20) + 1));
    const s = f.stats().routes['posix-host'];
    assert.equal(s.ops, 11);
    assert.equal(s.bytes, 10 * (1 << 20) + 1);
    assert.equal(s.operations, 1);
    assert.ok(s.busySeconds > 0);
    assert.equal(stats().routes['posix-host'].ops, 11);
    for (const r of ['gds', 'cufile-compat', 'cufile-unknown', 'posix-device'] as const) assert.equal(f.stats().routes[r].ops, 0);
    f.resetStats();
    assert.equal(f.stats().routes['posix-host'].ops, 0);
    assert.equal(stats().routes['posix-host'].ops, 11);
  });
});

describe('abort and progress', () => {
  test('progress reports increasing byte counts ending at the total', async () => {
    configure({ taskSize: 64 * 1024, threads: 2 });
    const { file } = makeFile(8 << 20);
    await using f = await open(file);
    const seen: number[] = [];
    await f.read(Buffer.alloc(8 << 20), { onProgress: (n) => seen.push(n) });
    assert.ok(seen.length >= 1);
    for (let i = 1; i < seen.length; i++) assert.ok(seen[i]! > seen[i - 1]!);
    assert.equal(seen.at(-1), 8 << 20);
  });

  test('an aborted read rejects with AbortError and leaves the file usable', async () => {
    configure({ taskSize: 4096, threads: 1 });
    const { file, data } = makeFile(32 << 20);
    await using f = await open(file);
    const ac = new AbortController();
    const p = f.read(Buffer.alloc(32 << 20), { signal: ac.signal, onProgress: () => ac.abort() });
    await assert.rejects(p, (e: Error & { code?: string }) => e.name === 'AbortError' && e.code === 'ABORT_ERR');
    const again = Buffer.alloc(1000);
    assert.equal(await f.read(again, { fileOffset: 5 }), 1000);
    assert.ok(again.equals(data.subarray(5, 1005)));
    const pre = new AbortController();
    pre.abort();
    await assert.rejects(f.read(again, { signal: pre.signal }), { name: 'AbortError' });
  });
});

describe('bad input touches nothing', () => {
  test('sizes, offsets and ranges', async () => {
    const { file } = makeFile(10000);
    await using f = await open(file, 'r');
    const b = Buffer.alloc(100, 7);
    const cases: [object, string][] = [
      [{ size: -1 }, 'ERR_PENSTOCK_INVALID_ARGUMENT'],
      [{ size: 1.5 }, 'ERR_PENSTOCK_INVALID_ARGUMENT'],
      [{ size: 101 }, 'ERR_PENSTOCK_OUT_OF_RANGE'],
      [{ targetOffset: 101, size: 0 }, 'ERR_PENSTOCK_OUT_OF_RANGE'],
      [{ targetOffset: 50, size: 51 }, 'ERR_PENSTOCK_OUT_OF_RANGE'],
      [{ fileOffset: -5 }, 'ERR_PENSTOCK_INVALID_ARGUMENT'],
      [{ fileOffset: Number.NaN }, 'ERR_PENSTOCK_INVALID_ARGUMENT'],
      [{ fileOffset: 2 ** 64 }, 'ERR_PENSTOCK_INVALID_ARGUMENT'],
      [{ targetOffset: '3' }, 'ERR_PENSTOCK_INVALID_ARGUMENT'],
      [{ signal: {} }, 'ERR_PENSTOCK_INVALID_ARGUMENT'],
      [{ onProgress: 5 }, 'ERR_PENSTOCK_INVALID_ARGUMENT'],
    ];
    for (const [opts, code] of cases) await assert.rejects(f.read(b, opts as never), { code }, JSON.stringify(opts));
    await assert.rejects(f.read('nope' as never), { code: 'ERR_PENSTOCK_INVALID_BUFFER' });
    await assert.rejects(f.read(null as never), { code: 'ERR_PENSTOCK_INVALID_BUFFER' });
    assert.ok(b.every((x) => x === 7), 'the target was not touched');
  });

  test('read-only, write-only, closed, missing, directory', async () => {
    const { file, data } = makeFile(5000);
    const f = await open(file, 'r');
    await assert.rejects(f.write(Buffer.alloc(10)), { code: 'ERR_PENSTOCK_NOT_WRITABLE' });
    assert.ok(fs.readFileSync(file).equals(data), 'the file was not touched');
    await f.close();
    await f.close();
    assert.equal(f.closed, true);
    await assert.rejects(f.read(Buffer.alloc(10)), { code: 'ERR_PENSTOCK_FILE_CLOSED' });
    const w = await open(newPath('wo'), 'w');
    await assert.rejects(w.read(Buffer.alloc(10)), { code: 'ERR_PENSTOCK_NOT_READABLE' });
    await w.close();
    await assert.rejects(open(`${tmpDir()}/missing/file`), (e: PenstockSystemError) => {
      assert.ok(e instanceof PenstockSystemError);
      assert.equal(e.code, 'ENOENT');
      assert.equal(e.errno, -2);
      assert.equal(e.syscall, 'open');
      assert.equal(e.path, `${tmpDir()}/missing/file`);
      return true;
    });
    await assert.rejects(open(tmpDir()), { code: 'EISDIR', syscall: 'open' });
    await assert.rejects(open(file, 'x' as never), { code: 'ERR_PENSTOCK_INVALID_ARGUMENT' });
    await assert.rejects(open(''), { code: 'ERR_PENSTOCK_INVALID_ARGUMENT' });
    await assert.rejects(open(file, 'wx'), { code: 'EEXIST' });
  });

  test('error stacks point at the caller', async () => {
    async function openerOfMissingFile() {
      await open(`${tmpDir()}/nope`);
    }
    await assert.rejects(openerOfMissingFile(), (e: Error) => /openerOfMissingFile/.test(e.stack ?? ''));
    const { file } = makeFile(100);
    await using f = await open(file);
    async function readerWithBadSize() {
      await f.read(Buffer.alloc(10), { size: 11 });
    }
    await assert.rejects(readerWithBadSize(), (e: Error) => /readerWithBadSize/.test(e.stack ?? ''));
  });

  test('close waits for operations in flight', async () => {
    configure({ taskSize: 4096, threads: 1 });
    const { file, data } = makeFile(16 << 20);
    const f = await open(file);
    const b = Buffer.alloc(16 << 20);
    const p = f.read(b);
    await f.close();
    assert.equal(await p, 16 << 20);
    assert.ok(b.equals(data));
  });

  test('settings are validated', () => {
    assert.throws(() => configure({ threads: 0 }), { code: 'ERR_PENSTOCK_INVALID_SETTING' });
    assert.throws(() => configure({ taskSize: 1000 }), { code: 'ERR_PENSTOCK_INVALID_SETTING' });
    assert.throws(() => configure({ compatMode: 'maybe' as never }), { code: 'ERR_PENSTOCK_INVALID_SETTING' });
    assert.throws(() => configure({ bounceBufferSize: 4096 }), { code: 'ERR_PENSTOCK_INVALID_SETTING' });
  });
});
