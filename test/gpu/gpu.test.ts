/**
 * Real-GPU tests. Without a GPU they skip with the reason; `npm run test:gpu`
 * (PENSTOCK_REQUIRE_GPU=1) makes that a failure instead.
 */
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import { describe, test } from 'node:test';
import { DeviceBuffer, PinnedBuffer, configure, getConfig, deviceCount, open, readFileToDevice, writeFile } from '../../src/index.js';
import { runtimeInfo } from '../../src/doctor.js';
import { ROUTES } from '../../src/measure.js';
import { dropPagesOrSkip, makeFile, newPath, pattern, sha256, tmpDir } from '../helpers.js';
import { gpuOrSkip } from './guard.js';


/** A large file created fast: random 8 MiB blocks, each different. */
function bigFile(size: number): { file: string; hash: string } {
  const file = `${tmpDir()}/big-${size}.bin`;
  const h = crypto.createHash('sha256');
  const fd = fs.openSync(file, 'w');
  for (let off = 0; off < size; ) {
    const chunk = crypto.randomBytes(Math.min(8 << 20, size - off));
    fs.writeSync(fd, chunk, 0, chunk.length, off);
    h.update(chunk);
    off += chunk.length;
  }
  fs.closeSync(fd);
  return { file, hash: h.digest('hex') };
}

const defaults = getConfig();

describe('GPU', () => {
  test('DeviceBuffer and PinnedBuffer round trips', async (t) => {
    if (!gpuOrSkip(t)) return;
    const data = pattern((16 << 20) + 3, 11);
    using dev = DeviceBuffer.alloc(data.length);
    await dev.copyFrom(data);
    assert.ok((await dev.toBuffer()).equals(data));
    using pinned = PinnedBuffer.alloc(data.length);
    pinned.bytes.set(data);
    using dev2 = DeviceBuffer.alloc(data.length);
    await dev2.copyFrom(pinned);
    pinned.bytes.fill(0);
    await dev2.copyTo(pinned);
    assert.ok(Buffer.from(pinned.buffer).equals(data));
    const view = dev2.subarray(1000, 5000);
    assert.ok((await view.toBuffer()).equals(data.subarray(1000, 5000)));
    const wrapped = DeviceBuffer.wrap(dev2.ptr + 16n, 4096);
    assert.equal(wrapped.device, 0);
    assert.ok((await wrapped.toBuffer()).equals(data.subarray(16, 16 + 4096)));
  });

  test('1 GiB file into GPU memory: hash, 256 tasks under one route, route explained', async (t) => {
    if (!gpuOrSkip(t)) return;
    configure({ ...defaults, mappedReads: false });
    const { file, hash } = bigFile(2 ** 30);
    await using f = await open(file);
    using buf = DeviceBuffer.alloc(2 ** 30);
    const t0 = performance.now();
    assert.equal(await f.read(buf), 2 ** 30);
    const first = performance.now() - t0;
    const s = f.stats().routes;
    const used = ROUTES.filter((r) => s[r].ops > 0);
    assert.equal(used.length, 1, `one route, got ${used.join(', ')}`);
    assert.equal(s[used[0]!].ops, 256);
    assert.equal(s[used[0]!].bytes, 2 ** 30);
    if (used[0] === 'posix-device') {
      const reason = f.route.reason;
      assert.ok(reason, 'a staged read of a large range has a recorded reason');
      assert.ok(reason.code.length > 0 && reason.message.length > 20);
      t.diagnostic(`fallback reason: [${reason.code}] ${reason.message}`);
    }
    f.resetStats();
    const t1 = performance.now();
    await f.read(buf);
    const warm = performance.now() - t1;
    t.diagnostic(`route ${used[0]}: first read ${(2 ** 30 / first / 1e6).toFixed(1)} GB/s, warm ${(2 ** 30 / warm / 1e6).toFixed(1)} GB/s`);
    assert.equal(sha256(await buf.toBuffer()), hash);
    fs.rmSync(file);
  });

  test('uncached 512 MiB into GPU memory: striped through the page cache (or O_DIRECT on NVMe), hash, staging pinned', async (t) => {
    if (!gpuOrSkip(t)) return;
    configure({ ...defaults, directIoRead: 'auto' });
    const size = 512 << 20;
    const { file, hash } = bigFile(size);
    if (!(await dropPagesOrSkip(t, file))) {
      fs.rmSync(file);
      return;
    }
    await using f = await open(file);
    using buf = DeviceBuffer.alloc(size);
    const t0 = performance.now();
    const rec = await f.readRecorded(buf);
    const ms = performance.now() - t0;
    assert.equal(rec.bytes, size);
    const cold = f.route.coldReads;
    assert.ok(cold, 'a read of uncached data records how it was planned');
    if (rec.route === 'posix-device') {
      if (cold.direct) assert.equal(rec.direct, true);
      else {
        assert.deepEqual(rec.way, { kind: 'staged', variant: 'striped' });
        assert.equal(rec.tasks, runtimeInfo().threads, 'one stripe per worker');
      }
    }
    assert.ok(runtimeInfo().pinnedBytes > 0, 'staging is pinned');
    t.diagnostic(`cold ${cold.device} (${cold.direct ? 'O_DIRECT' : 'page cache, stripes'}): ${(size / ms / 1e6).toFixed(2)} GB/s, way ${JSON.stringify(rec.way)}`);
    assert.equal(sha256(await buf.toBuffer()), hash);
    fs.rmSync(file);
  });

  test('warm 1 GiB with the mapped route: hash, tasks split between two routes or the refusal explained', async (t) => {
    if (!gpuOrSkip(t)) return;
    configure({ ...defaults, mappedReads: true });
    try {
      const { file, hash } = bigFile(2 ** 30);
      await using f = await open(file, 'r', { compatMode: 'on' });
      using buf = DeviceBuffer.alloc(2 ** 30);
      await f.read(buf);
      f.resetStats();
      const t0 = performance.now();
      assert.equal(await f.read(buf), 2 ** 30);
      const ms = performance.now() - t0;
      assert.equal(sha256(await buf.toBuffer()), hash);
      const s = f.stats().routes;
      assert.equal(s['mapped-device'].ops + s['posix-device'].ops, 256);
      assert.equal(s['mapped-device'].bytes + s['posix-device'].bytes, 2 ** 30);
      if (f.route.mapped) {
        t.diagnostic(`mapped route refused: ${f.route.mapped.message}`);
        assert.equal(s['mapped-device'].ops, 0);
      } else {
        assert.ok(s['mapped-device'].ops > 0, 'the mapped route carried part of the read');
        assert.ok(s['posix-device'].ops > 0, 'the staged route carried part of the read');
      }
      t.diagnostic(`warm ${(2 ** 30 / ms / 1e6).toFixed(1)} GB/s, mapped ${s['mapped-device'].ops} tasks, staged ${s['posix-device'].ops}`);
      fs.rmSync(file);
    } finally {
      configure(defaults);
    }
  });

  test('the machine refusing cuFile is recorded with its reason', async (t) => {
    if (!gpuOrSkip(t)) return;
    const rt = runtimeInfo();
    t.diagnostic(`cuFile: ${JSON.stringify({ loaded: rt.cufile.loaded, version: rt.cufile.version, driverOpen: rt.cufile.driverOpen, statsLevel: rt.cufile.statsLevel, nvfs: rt.cufile.props && `${rt.cufile.props.nvfsMajor}.${rt.cufile.props.nvfsMinor}` })}`);
    const { file } = makeFile(8 << 20);
    await using f = await open(file);
    using buf = DeviceBuffer.alloc(8 << 20);
    await f.read(buf);
    const r = f.route;
    t.diagnostic(`route: ${JSON.stringify(r)}`);
    if (r.device === 'cufile') {
      const s = f.stats().routes;
      assert.equal(s.gds.ops + s['cufile-compat'].ops + s['cufile-unknown'].ops, 2);
    } else {
      assert.equal(r.device, 'posix-device');
      // Where the machine has no direct path, penstock does not open cuFile at all, and says so;
      // where it opens it in the background, a read may start before the open is done.
      const codes = ['CUFILE_NO_DIRECT_PATH', 'CUFILE_COMPAT_FORCED', 'CUFILE_OPENING', 'CUFILE_HANDLE_REFUSED', 'CUFILE_NOT_LOADED', 'CUFILE_DRIVER_OPEN_FAILED'];
      assert.ok(r.reason && codes.includes(r.reason.code), JSON.stringify(r.reason));
      if (rt.cufileOpen.open === 'never') assert.equal(r.reason.code, rt.cufileOpen.reason.code);
      if (r.reason.code === 'CUFILE_HANDLE_REFUSED') assert.ok((r.reason.cufileNumber ?? 0) > 5000);
    }
  });

  test('write path: GPU memory to file, several offsets', async (t) => {
    if (!gpuOrSkip(t)) return;
    const data = crypto.randomBytes((64 << 20) + 12345);
    using dev = DeviceBuffer.alloc(data.length);
    await dev.copyFrom(data);
    const out = newPath('gpu-w');
    assert.equal(await writeFile(out, dev), data.length);
    assert.ok(fs.readFileSync(out).equals(data));
    await using f = await open(out, 'r+');
    assert.equal(await f.write(dev.subarray(5, 100005), { fileOffset: 4093 }), 100000);
    const expect = Buffer.from(data);
    data.subarray(5, 100005).copy(expect, 4093);
    assert.ok(fs.readFileSync(out).equals(expect));
  });

  test('several files at once, staged reads with O_DIRECT too', async (t) => {
    if (!gpuOrSkip(t)) return;
    const files = [makeFile(33 << 20), makeFile((17 << 20) + 1), makeFile(5000)];
    const bufs = await Promise.all(files.map((x) => readFileToDevice(x.file)));
    for (let i = 0; i < files.length; i++) assert.ok((await bufs[i]!.toBuffer()).equals(files[i]!.data));
    bufs.forEach((b) => b.free());
    configure({ directIoRead: true });
    try {
      await using f = await open(files[0]!.file, 'r', { compatMode: 'on' });
      using b = DeviceBuffer.alloc(10 << 20);
      assert.equal(await f.read(b, { fileOffset: 4097 }), 10 << 20);
      assert.ok((await b.toBuffer()).equals(files[0]!.data.subarray(4097, 4097 + (10 << 20))));
    } finally {
      configure({ directIoRead: 'auto' });
    }
  });

  test('every GPU gets its own file concurrently', async (t) => {
    if (!gpuOrSkip(t)) return;
    const n = deviceCount();
    const files = Array.from({ length: n }, (_, i) => makeFile((64 << 20) + i, 100 + i));
    const bufs = await Promise.all(files.map((x, i) => readFileToDevice(x.file, { device: i })));
    for (let i = 0; i < n; i++) {
      assert.equal(bufs[i]!.device, i);
      assert.equal(sha256(await bufs[i]!.toBuffer()), sha256(files[i]!.data));
      bufs[i]!.free();
    }
    t.diagnostic(`${n} GPU(s)`);
  });
});
