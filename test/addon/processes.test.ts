/**
 * Behaviour that is decided once per process (library loading, driver open) or at process exit,
 * each checked in a child process of its own.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { test } from 'node:test';
import { defaults } from '../../src/settings/config.js';
import { planDeviceRead } from '../../src/plan/transfer-plan.js';
import { fakeDriverDir, fakeSystemRoot, makeFile, repoRoot } from '../helpers.js';
import { importEveryEntry } from '../entry-points.js';

const everyEntry = importEveryEntry();
const fakeCuda = path.join(fakeDriverDir, 'libcuda.so.1');
const fakeCuFile = path.join(fakeDriverDir, 'libcufile.so.0');
const withNvidiaFs = fakeSystemRoot({ nvidiaFs: true });

/** Runs `body` as an ES module in a fresh node with `p` bound to penstock; returns its JSON output. */
function child(body: string, env: Record<string, string> = {}, timeout = 60_000, flags: string[] = []) {
  const code = `${everyEntry}\n${body}`;
  const r = spawnSync(process.execPath, [...flags, '--input-type=module', '-e', code], {
    env: { ...process.env, PENSTOCK_CUDA_LIBRARY: fakeCuda, PENSTOCK_CUFILE_LIBRARY: fakeCuFile, PENSTOCK_SYSTEM_ROOT: withNvidiaFs, ...env },
    encoding: 'utf8',
    timeout,
  });
  const last = r.stdout.trim().split('\n').at(-1) ?? '';
  let json: unknown;
  try {
    json = JSON.parse(last);
  } catch {
    json = undefined;
  }
  return { status: r.status, signal: r.signal, stdout: r.stdout, stderr: r.stderr, json: json as Record<string, unknown> };
}

const { file } = makeFile(8 << 20);

test('no CUDA driver: device memory is refused with a clear error, host I/O works', () => {
  const r = child(
    `const out = {};
     try { p.DeviceBuffer.alloc(10); } catch (e) { out.alloc = [e.code, e.message]; }
     try { p.PinnedBuffer.alloc(10); } catch (e) { out.pinned = e.code; }
     try { p.DeviceBuffer.wrap(4096n, 1); } catch (e) { out.wrap = e.code; }
     out.hasGpu = p.hasGpu(); out.count = p.deviceCount();
     const f = await p.open(${JSON.stringify(file)}); const b = Buffer.alloc(100);
     out.read = await f.read(b); await f.close();
     console.log(JSON.stringify(out));`,
    { PENSTOCK_CUDA_LIBRARY: '/nonexistent/libcuda.so.1' },
  );
  assert.equal(r.status, 0, r.stderr);
  const [code, message] = r.json.alloc as [string, string];
  assert.equal(code, 'ERR_PENSTOCK_NO_CUDA');
  assert.match(message, /could not be loaded/);
  assert.equal(r.json.pinned, 'ERR_PENSTOCK_NO_CUDA');
  assert.equal(r.json.wrap, 'ERR_PENSTOCK_NO_CUDA');
  assert.equal(r.json.hasGpu, false);
  assert.equal(r.json.count, 0);
  assert.equal(r.json.read, 100);
});

test('a driver without GPUs: cuInit says CUDA_ERROR_NO_DEVICE, penstock says no GPU', () => {
  const r = child(`try { p.DeviceBuffer.alloc(10); } catch (e) { console.log(JSON.stringify({ code: e.code, message: e.message })); }`, {
    FAKE_CUDA_DEVICE_COUNT: '0',
  });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.json.code, 'ERR_PENSTOCK_NO_CUDA');
  assert.match(String(r.json.message), /CUDA_ERROR_NO_DEVICE/);
});

test('host-only programs never load the CUDA driver', () => {
  const r = child(
    `const f = await p.open(${JSON.stringify(file)}); await f.read(Buffer.alloc(1 << 20)); await f.close();
     const maps = (await import('node:fs')).readFileSync('/proc/self/maps', 'utf8');
     console.log(JSON.stringify({ cuda: maps.includes('libcuda.so'), cufile: maps.includes('libcufile.so') }));`,
  );
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(r.json, { cuda: false, cufile: false });
});

// Under 'auto' cuFile's driver opens in the background: the read waits for that (a read that
// starts while it opens is staged with CUFILE_OPENING, whatever the outcome).
const routeBody = (compat: string) => `
  const out = {};
  ${compat === 'auto' ? 'await p.prepareGpu(0);' : ''}
  const f = await p.open(${JSON.stringify(file)}, 'r', { compatMode: '${compat}' });
  const b = p.DeviceBuffer.alloc(8 << 20);
  try { out.bytes = await f.read(b); } catch (e) { out.error = [e.name, e.code, e.message]; }
  out.route = f.route; out.stats = f.stats().routes['posix-device'].ops;
  const rt = p.runtimeInfo(); out.cufile = { loaded: rt.cufile.loaded, driverOpen: rt.cufile.driverOpen };
  console.log(JSON.stringify(out));`;

test('cuFile missing: the staged path, with the reason; compatMode off makes it an error', () => {
  const auto = child(routeBody('auto'), { PENSTOCK_CUFILE_LIBRARY: '/nonexistent/libcufile.so.0' });
  assert.equal(auto.status, 0, auto.stderr);
  assert.equal(auto.json.bytes, 8 << 20);
  const route = auto.json.route as { device: string; reason: { code: string; message: string } };
  assert.equal(route.device, 'posix-device');
  assert.equal(route.reason.code, 'CUFILE_NOT_LOADED');
  assert.match(route.reason.message, /PENSTOCK_CUFILE_LIBRARY/);
  assert.equal(auto.json.stats, Math.ceil((8 << 20) / planDeviceRead(defaults(), 8 << 20, false, false).taskSize), 'tasks of the default plan');
  const off = child(routeBody('off'), { PENSTOCK_CUFILE_LIBRARY: '/nonexistent/libcufile.so.0' });
  const [name, code, message] = off.json.error as string[];
  assert.equal(name, 'PenstockError');
  assert.equal(code, 'ERR_PENSTOCK_CUFILE_REQUIRED');
  assert.match(message!, /compatMode is 'off'/);
  assert.equal(off.json.stats, 0);
});

test('the cuFile driver refusing to open: the staged path, with the reason', () => {
  const r = child(routeBody('auto'), { FAKE_CUFILE_DRIVER_OPEN_ERROR: '5009' });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.json.bytes, 8 << 20);
  const route = r.json.route as { device: string; reason: { code: string; message: string } };
  assert.equal(route.reason.code, 'CUFILE_DRIVER_OPEN_FAILED');
  assert.match(route.reason.message, /CU_FILE_DEVICE_NOT_SUPPORTED/);
  assert.deepEqual(r.json.cufile, { loaded: true, driverOpen: false });
});

test('device memory and files dropped without free() or close() are released by the collector', () => {
  const r = child(
    `const before = p.memoryInfo(0).free;
     (() => { for (let i = 0; i < 4; i++) p.DeviceBuffer.alloc(64 << 20); })();
     const during = p.memoryInfo(0).free;
     const fs = await import('node:fs');
     const onFile = () => fs.readdirSync('/proc/self/fd').filter((f) => { try { return fs.readlinkSync('/proc/self/fd/' + f) === ${JSON.stringify(file)}; } catch { return false; } }).length;
     await (async () => { for (let i = 0; i < 5; i++) await p.open(${JSON.stringify(file)}); })();
     const fdsDuring = onFile();
     const warnings = []; process.on('warning', (w) => warnings.push(w.code));
     for (let i = 0; i < 5; i++) { globalThis.gc(); await new Promise((r) => setTimeout(r, 20)); }
     console.log(JSON.stringify({ held: before - during, after: before - p.memoryInfo(0).free,
       fds: fdsDuring, fdsAfter: onFile(), warnings }));`,
    {},
    60_000,
    ['--expose-gc'],
  );
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.json.held, 4 * (64 << 20));
  assert.equal(r.json.after, 0);
  assert.equal(r.json.fds, 5);
  assert.equal(r.json.fdsAfter, 0);
  assert.deepEqual(r.json.warnings, Array(5).fill('PENSTOCK_FILE_NOT_CLOSED'));
});

test('PENSTOCK_* variables configure the defaults, and bad ones are refused', () => {
  const r = child(`console.log(JSON.stringify(p.getConfig()));`, {
    PENSTOCK_THREADS: '3',
    PENSTOCK_TASK_SIZE: '1MiB',
    PENSTOCK_COMPAT_MODE: 'on',
    PENSTOCK_GDS_THRESHOLD: '64k',
    PENSTOCK_BOUNCE_BUFFER_SIZE: '2MiB',
    PENSTOCK_DIRECT_IO_READ: '1',
    PENSTOCK_HOST_STAGING: '0',
    PENSTOCK_WRITE_THREADS: '2',
    PENSTOCK_MAPPED_READS: 'false',
    PENSTOCK_REMOTE_CONCURRENCY: '7',
    PENSTOCK_REMOTE_RANGE_SIZE: '1MiB',
    PENSTOCK_REMOTE_WORKERS: '0',
    PENSTOCK_INLINE_READ_MAX: '256KiB',
    PENSTOCK_KEPT_PAGES_MAX: '64MiB',
  });
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(
    { ...r.json, cudaLibrary: undefined, cufileLibrary: undefined, systemRoot: undefined },
    {
      compatMode: 'on', threads: 3, taskSize: 1 << 20, gdsThreshold: 65536, bounceBufferSize: 2 << 20, directIoRead: true, directIoWrite: false, writeThreads: 2, mappedReads: false, hostStaging: false, keptPagesMax: 64 << 20, inlineReadMax: 256 << 10, cudaLibrary: undefined, cufileLibrary: undefined, systemRoot: undefined,
      remoteConcurrency: 7, remoteRangeSize: 1 << 20, remoteRetries: 5, remoteTimeoutMs: 30_000, remoteRetryBaseMs: 100, remoteWorkers: 0,
    },
  );
  const bad = child(`try { p.getConfig(); } catch (e) { console.log(JSON.stringify({ code: e.code, message: e.message })); }`, { PENSTOCK_TASK_SIZE: 'lots' });
  assert.equal(bad.json.code, 'ERR_PENSTOCK_INVALID_SETTING');
  for (const env of [{ PENSTOCK_WRITE_THREADS: '0' }, { PENSTOCK_WRITE_THREADS: 'many' }, { PENSTOCK_MAPPED_READS: 'sometimes' }, { PENSTOCK_INLINE_READ_MAX: '17MiB' }, { PENSTOCK_KEPT_PAGES_MAX: '-1' }, { PENSTOCK_KEPT_PAGES_MAX: 'plenty' }] as Record<string, string>[]) {
    const r2 = child(`try { p.getConfig(); console.log(JSON.stringify({})); } catch (e) { console.log(JSON.stringify({ code: e.code, message: e.message })); }`, env);
    assert.equal(r2.json.code, 'ERR_PENSTOCK_INVALID_SETTING', JSON.stringify(env));
  }
});

for (const [name, body] of [
  [
    'host reads in flight',
    `p.configure({ threads: 1, taskSize: 4096 }); const f = await p.open(${JSON.stringify(file)});
     for (let i = 0; i < 8; i++) f.read(Buffer.alloc(8 << 20)); setTimeout(() => process.exit(0), 5);`,
  ],
  [
    'staged device reads and writes in flight',
    `p.configure({ threads: 2, taskSize: 4096, bounceBufferSize: 65536 });
     const f = await p.open(${JSON.stringify(file)}, 'r', { compatMode: 'on' }); const b = p.DeviceBuffer.alloc(8 << 20);
     for (let i = 0; i < 4; i++) f.read(b.subarray(0, 8 << 20)).catch(() => {});
     const w = await p.open(${JSON.stringify(file)} + '.w', 'w', { compatMode: 'on' }); w.write(b);
     setTimeout(() => process.exit(0), 5);`,
  ],
  [
    'cuFile reads in flight, pinned memory alive, files never closed',
    `p.configure({ threads: 2, taskSize: 4096 }); const pin = p.PinnedBuffer.alloc(1 << 20);
     const f = await p.open(${JSON.stringify(file)}); const b = p.DeviceBuffer.alloc(8 << 20);
     for (let i = 0; i < 4; i++) f.read(b); f.read(pin); setTimeout(() => {}, 1);`,
  ],
  [
    'a worker thread terminated mid-read',
    `const { Worker } = await import('node:worker_threads');
     const w = new Worker(\`${JSON.stringify(everyEntry).slice(1, -1)}
       p.configure({ threads: 1, taskSize: 4096 }); const f = await p.open(${JSON.stringify(JSON.stringify(file)).slice(1, -1)});
       for (let i = 0; i < 8; i++) f.read(Buffer.alloc(8 << 20));
       (await import('node:worker_threads')).parentPort.postMessage('go');\`, { eval: true, type: 'module' });
     await new Promise((r) => w.once('message', r)); await w.terminate();
     const f = await p.open(${JSON.stringify(file)}); console.log(JSON.stringify({ after: await f.read(Buffer.alloc(4096)) }));`,
  ],
  [
    'batched reads into host and GPU memory in flight',
    `p.configure({ threads: 2, bounceBufferSize: 65536 }); const f = await p.open(${JSON.stringify(file)}, 'r', { compatMode: 'on' });
     const b = p.DeviceBuffer.alloc(8 << 20); const h = Buffer.alloc(8 << 20);
     const ranges = (t) => Array.from({ length: 2000 }, (_, i) => ({ fileOffset: (i * 7 * 4096) % (8 << 20), size: 4096, target: t, targetOffset: i * 4096 }));
     for (let i = 0; i < 4; i++) { p.readBatch(ranges(b), { file: f }).catch(() => {}); p.readBatch(ranges(h), { file: f }).catch(() => {}); }
     setTimeout(() => process.exit(0), 5);`,
  ],
  [
    'a worker thread terminated mid-batch',
    `const { Worker } = await import('node:worker_threads');
     const w = new Worker(\`${JSON.stringify(everyEntry).slice(1, -1)}
       p.configure({ threads: 1 }); const f = await p.open(${JSON.stringify(JSON.stringify(file)).slice(1, -1)}, 'r', { compatMode: 'on' });
       const b = p.DeviceBuffer.alloc(8 << 20); const h = Buffer.alloc(8 << 20);
       for (const t of [b, h, b, h]) p.readBatch(Array.from({ length: 2000 }, (_, i) => ({ fileOffset: i * 4096, size: 4096, target: t, targetOffset: i * 4096 })), { file: f });
       (await import('node:worker_threads')).parentPort.postMessage('go');\`, { eval: true, type: 'module' });
     await new Promise((r) => w.once('message', r)); await w.terminate();
     const f = await p.open(${JSON.stringify(file)}); console.log(JSON.stringify({ after: await f.read(Buffer.alloc(4096)) }));`,
  ],
  [
    'a worker thread that throws mid-read',
    `const { Worker } = await import('node:worker_threads');
     const w = new Worker(\`${JSON.stringify(everyEntry).slice(1, -1)}
       p.configure({ threads: 1, taskSize: 4096 }); const f = await p.open(${JSON.stringify(JSON.stringify(file)).slice(1, -1)});
       for (let i = 0; i < 8; i++) f.read(Buffer.alloc(8 << 20)); throw new Error('boom');\`, { eval: true, type: 'module' });
     const code = await new Promise((r) => { w.on('error', () => {}); w.on('exit', r); });
     const f = await p.open(${JSON.stringify(file)}); console.log(JSON.stringify({ after: await f.read(Buffer.alloc(4096)), code }));`,
  ],
] as const) {
  test(`no crash at exit: ${name}`, () => {
    const r = child(body, { FAKE_CUDA_ASYNC_DELAY_US: '2000' });
    assert.equal(r.signal, null, `killed by ${r.signal}: ${r.stderr}`);
    assert.equal(r.status, 0, r.stderr);
    if (name.includes('terminated')) assert.deepEqual(r.json, { after: 4096 });
    if (name.includes('throws')) assert.deepEqual(r.json, { after: 4096, code: 1 });
  });
}
