/**
 * `penstock serve` in a child process with the fake driver (whose device memory is shared memory,
 * so clients really map the daemon's bytes): acquire and compare bytes, leases ended by release,
 * by a closed connection and by a crashed client, eviction order under the budget, leased sets
 * never freed, single-flight loads, failing loads, and GPU memory back at its baseline.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { repoRoot, tmpDir, useFakeDriver } from '../helpers.js';
import type { ServeClient } from '../../src/index.js';
import { RangeServer } from '../remote-range-server.js';
import { checkpoint, fakeEnv, sha, sizedCheckpoint, startDaemon, until, type Daemon } from './kit.js';

useFakeDriver({ FAKE_CUDA_DEVICE_COUNT: '1' });
const p = await import('../../src/index.js');

type Stats = { loads: number; hits: number; acquires: number; evictions: number; leases: number; residentBytes: number; loadFailures: number; exports: number; devices: { free: number }[] };
const statsOf = async (c: ServeClient) => (await c.stats()) as unknown as Stats;

describe('one daemon, clients here and in other processes', () => {
  let d: Daemon;
  let baseline: number;
  const model = checkpoint('model', [
    { name: 'embed', dtype: 'BF16', shape: [64, 48] },
    { name: 'layers.0.q', dtype: 'F32', shape: [48, 48] },
    { name: 'layers.0.norm', dtype: 'F16', shape: [48] },
    { name: 'head', dtype: 'I8', shape: [33, 7] },
  ]);

  before(async () => {
    d = await startDaemon(['--budget', '64MiB']);
    await using c = await p.connectServer(d.socket);
    baseline = (await statsOf(c)).devices[0]!.free;
  });
  after(async () => {
    const r = await d.stop();
    assert.equal(r.code, 143, r.output);
    assert.ok(!fs.existsSync(d.socket), 'the socket file is removed on exit');
  });

  test('acquire maps the daemon\'s copy here: every tensor\'s bytes equal the file\'s; a second acquire is a hit on the same memory', async () => {
    await using c = await p.connectServer(d.socket);
    await using a = await c.acquire({ path: model.file });
    assert.equal(a.hit, false);
    assert.deepEqual([...a.tensors.keys()], ['embed', 'layers.0.q', 'layers.0.norm', 'head']);
    for (const [name, bytes] of model.bytes) assert.equal(sha(await a.get(name)!.buffer.toBuffer()), sha(bytes), name);
    assert.deepEqual(a.get('embed')!.shape, [64, 48]);
    assert.equal(a.get('embed')!.dtype, 'BF16');
    await using b = await c.acquire({ path: model.file });
    assert.equal(b.hit, true);
    assert.equal(b.key, a.key);
    assert.equal(b.manifest.slab.handle, a.manifest.slab.handle, 'one export of one slab');
    const s = await statsOf(c);
    assert.equal(s.loads, 1);
    assert.equal(s.leases, 2);
  });

  test('filters and row shards are sets of their own, with the bytes loadTensors gives', async () => {
    await using c = await p.connectServer(d.socket);
    await using f = await c.acquire({ path: model.file, filter: { prefix: 'layers.0.' } });
    assert.deepEqual([...f.tensors.keys()], ['layers.0.q', 'layers.0.norm']);
    assert.equal(sha(await f.get('layers.0.norm')!.buffer.toBuffer()), sha(model.bytes.get('layers.0.norm')!));
    await using r = await c.acquire({ path: model.file, filter: ['layers.0.q'], rows: { index: 1, count: 2 } });
    const q = model.bytes.get('layers.0.q')!;
    assert.deepEqual(r.get('layers.0.q')!.shape, [24, 48]);
    assert.equal(sha(await r.get('layers.0.q')!.buffer.toBuffer()), sha(q.subarray(24 * 48 * 4)));
    // Names in another order are the same set.
    await using again = await c.acquire({ path: model.file, filter: ['layers.0.q'], rows: { index: 1, count: 2 } });
    assert.equal(again.hit, true);
  });

  test('a lease ends with release, with the connection closing, and with a client process that crashes', async () => {
    await using c = await p.connectServer(d.socket);
    const before = (await statsOf(c)).leases;
    const a = await c.acquire({ path: model.file });
    assert.equal((await statsOf(c)).leases, before + 1);
    await a.release();
    assert.equal(a.released, true);
    assert.throws(() => a.slab.subarray(0, 1), { code: 'ERR_PENSTOCK_FREED' }, 'release unmapped it here');
    assert.equal((await statsOf(c)).leases, before);
    // A second connection that closes with a lease held.
    const other = await p.connectServer(d.socket);
    await other.acquire({ path: model.file });
    assert.equal((await statsOf(c)).leases, before + 1);
    await other.close();
    await until(async () => (await statsOf(c)).leases === before, 'the closed connection\'s lease ended');
    // A process that maps the set, checks a byte, and dies by SIGKILL while holding its lease.
    const entry = path.join(repoRoot, 'dist/src/index.js');
    const child = spawn(process.execPath, ['--input-type=module', '-e', `
      const p = await import(${JSON.stringify(entry)});
      const c = await p.connectServer(process.argv[1]);
      const s = await c.acquire({ path: process.argv[2] });
      const b = await s.get('head').buffer.toBuffer();
      console.log(JSON.stringify({ first: b[0] }));
      setInterval(() => {}, 1000);`, d.socket, model.file], { env: fakeEnv(), stdio: ['ignore', 'pipe', 'inherit'] });
    const line = await new Promise<string>((resolve) => child.stdout!.once('data', (x: Buffer) => resolve(x.toString())));
    assert.deepEqual(JSON.parse(line), { first: model.bytes.get('head')![0] });
    assert.equal((await statsOf(c)).leases, before + 1);
    child.kill('SIGKILL');
    await until(async () => (await statsOf(c)).leases === before, 'the crashed client\'s lease ended');
    assert.equal(child.signalCode ?? (await new Promise((r) => child.once('exit', (_c, s) => r(s)))), 'SIGKILL');
    assert.ok((await c.list()).some((s) => s.key.includes('model.safetensors')), 'the set stays resident for the next client');
  });

  test('a leased set cannot be evicted; once released it can, and the GPU memory is back at its baseline', async () => {
    await using c = await p.connectServer(d.socket);
    const a = await c.acquire({ path: model.file });
    await assert.rejects(c.evict(a.key), { code: 'ERR_PENSTOCK_SERVE_LEASED' });
    await assert.rejects(c.evict('no-such-set'), { code: 'ERR_PENSTOCK_SERVE_UNKNOWN_SET' });
    const id = (await c.list()).find((s) => s.key === a.key)!.id;
    await a.release();
    assert.deepEqual(await c.evict(id), [a.key], 'evicted by its short id');
    await c.evictIdle();
    const s = await statsOf(c);
    assert.equal(s.residentBytes, 0);
    assert.equal(s.exports, 0, 'every export released');
    assert.equal(s.devices[0]!.free, baseline, 'GPU memory back at its baseline');
  });

  test('loads that fail get typed answers and leave nothing behind; the daemon keeps serving', async () => {
    await using c = await p.connectServer(d.socket);
    const bad = path.join(tmpDir(), 'serve-ckpt', 'bad.safetensors');
    fs.writeFileSync(bad, Buffer.from('garbage that is no safetensors header'));
    await assert.rejects(c.acquire({ path: '/nonexistent/model.safetensors' }), { code: 'ENOENT' });
    await assert.rejects(c.acquire({ path: bad }), (e: { code: string }) => e.code.startsWith('ERR_PENSTOCK_TENSOR') || e.code.startsWith('ERR_PENSTOCK_SAFETENSORS'));
    await assert.rejects(c.acquire({ path: model.file, filter: ['missing.tensor'] }), (e: { code: string }) => e.code.startsWith('ERR_PENSTOCK_'));
    await assert.rejects(c.acquire({ path: 'no-such-relative.safetensors' }), { code: 'ENOENT' }, 'a relative path is made absolute by the client');
    await assert.rejects(c.acquire({ path: model.file, device: 3 }), { code: 'ERR_PENSTOCK_INVALID_DEVICE' });
    const acquires = (await statsOf(c)).acquires;
    await assert.rejects(c.acquire({ path: model.file }, { devise: 0 } as never), { code: 'ERR_PENSTOCK_UNKNOWN_OPTION' });
    assert.equal((await statsOf(c)).acquires, acquires, 'refused before asking the daemon');
    const s = await statsOf(c);
    assert.equal(s.residentBytes, 0);
    assert.ok(s.loadFailures >= 4);
    assert.equal(s.devices[0]!.free, baseline);
    await using ok = await c.acquire({ path: model.file });
    assert.equal(sha(await ok.get('head')!.buffer.toBuffer()), sha(model.bytes.get('head')!));
  });
});

describe('the budget', () => {
  test('sets are evicted least recently used first; leased sets never; too large and budget-full are refused', async () => {
    const kib = 1024;
    const [a, b, c3, e, big] = ['a', 'b', 'c', 'e', 'big'].map((n) => sizedCheckpoint(`lru-${n}`, n === 'big' ? 400 * kib : 100 * kib));
    const d = await startDaemon(['--budget', '350KiB']);
    try {
      await using c = await p.connectServer(d.socket);
      const baseline = (await statsOf(c)).devices[0]!.free;
      const touch = async (x: { file: string }) => (await c.acquire({ path: x.file })).release();
      await touch(a!);
      await touch(b!);
      await touch(c3!);
      await touch(a!); // b is now the least recently used
      await touch(e!); // needs room: b goes
      const files = async () => (await c.list()).map((s) => path.basename(s.spec.path[0]!)).sort();
      assert.deepEqual(await files(), ['lru-a.safetensors', 'lru-c.safetensors', 'lru-e.safetensors']);
      await touch(b!); // c is now the least recently used
      assert.deepEqual(await files(), ['lru-a.safetensors', 'lru-b.safetensors', 'lru-e.safetensors']);
      assert.equal((await statsOf(c)).evictions, 2);
      await assert.rejects(c.acquire({ path: big!.file }), { code: 'ERR_PENSTOCK_SERVE_TOO_LARGE' });
      // All three held: a fourth cannot be loaded, and none of the three is touched.
      const held = [await c.acquire({ path: a!.file }), await c.acquire({ path: b!.file }), await c.acquire({ path: e!.file })];
      await assert.rejects(c.acquire({ path: c3!.file }), { code: 'ERR_PENSTOCK_SERVE_BUDGET_FULL' });
      const bytesOf = async (s: { slab: { toBuffer(): Promise<Buffer> } }) => sha(await s.slab.toBuffer());
      const fileBytes = (x: { bytes: Map<string, Buffer> }) => sha(Buffer.concat([...x.bytes.values()]));
      assert.deepEqual(await Promise.all(held.map(bytesOf)), [a, b, e].map((x) => fileBytes(x!)));
      await held[0]!.release();
      await using now = await c.acquire({ path: c3!.file }); // a, released, makes room
      assert.equal(await bytesOf(now), fileBytes(c3!));
      for (const h of held) await h.release();
      await now.release();
      await c.evictIdle();
      assert.equal((await statsOf(c)).devices[0]!.free, baseline);
    } finally {
      assert.equal((await d.stop()).code, 143);
    }
  });
});

describe('several GPUs', () => {
  test('the budget is per GPU; a set on GPU 1 is found by its PCI bus id in a client that sees the GPUs in another order', async () => {
    const kib = 1024;
    const [a, b] = ['a', 'b'].map((n) => sizedCheckpoint(`two-${n}`, 100 * kib));
    const d = await startDaemon(['--budget', '150KiB'], { FAKE_CUDA_DEVICE_COUNT: '2' });
    try {
      await using c = await p.connectServer(d.socket);
      // Asked for and released without mapping: this process sees only one GPU.
      for (const [x, device] of [[a!, 0], [b!, 1]] as const) {
        const { lease } = await c.request('acquire', { set: { path: [x.file], device } });
        await c.request('release', { lease });
      }
      const s = (await c.stats()) as { evictions: number; devices: { device: number; held: number }[] };
      assert.equal(s.evictions, 0, 'each GPU has its own budget');
      assert.deepEqual(s.devices.map((x) => [x.device, x.held]), [[0, 100 * kib], [1, 100 * kib]]);
      const entry = path.join(repoRoot, 'dist/src/index.js');
      const child = spawn(process.execPath, ['--input-type=module', '-e', `
        const p = await import(${JSON.stringify(entry)});
        const crypto = await import('node:crypto');
        const c = await p.connectServer(process.argv[1]);
        const s = await c.acquire({ path: process.argv[2], device: 1 });
        const bytes = await s.slab.toBuffer();
        console.log(JSON.stringify({ device: s.slab.device, sha: crypto.createHash('sha256').update(bytes).digest('hex') }));
        await s.release(); await c.close();`, d.socket, b!.file], { env: fakeEnv({ FAKE_CUDA_VISIBLE_DEVICES: '1,0' }), stdio: ['ignore', 'pipe', 'inherit'] });
      let out = '';
      child.stdout!.on('data', (x: Buffer) => (out += x.toString()));
      assert.equal(await new Promise((r) => child.once('exit', r)), 0);
      assert.deepEqual(JSON.parse(out), { device: 0, sha: sha(Buffer.concat([...b!.bytes.values()])) }, 'physical GPU 1 is ordinal 0 there');
      // Here GPU 1 is not visible: the mapping fails with its code, and the lease is given back.
      await assert.rejects(c.acquire({ path: b!.file, device: 1 }), { code: 'ERR_PENSTOCK_IPC_DEVICE_NOT_VISIBLE' });
      assert.equal((await c.stats()).leases, 0);
    } finally {
      assert.equal((await d.stop()).code, 143);
    }
  });
});

describe('a GPU fuller than the budget says', () => {
  test('a load the GPU has no room for evicts idle sets, least recently used first, and tries again; with none idle it fails typed', async () => {
    const kib = 1024;
    const [a, b, c3, e] = ['a', 'b', 'c', 'e'].map((n) => sizedCheckpoint(`oom-${n}`, 100 * kib));
    // The GPU holds 350 KiB although the budget allows 1 MiB: other processes use the rest.
    const d = await startDaemon(['--budget', '1MiB'], { FAKE_CUDA_MEM_LIMIT: String(350 * kib) });
    try {
      await using c = await p.connectServer(d.socket);
      for (const x of [a, b, c3]) await (await c.acquire({ path: x!.file })).release();
      await using got = await c.acquire({ path: e!.file });
      assert.equal(sha(await got.slab.toBuffer()), sha(Buffer.concat([...e!.bytes.values()])));
      const files = (await c.list()).map((s) => path.basename(s.spec.path[0]!)).sort();
      assert.deepEqual(files, ['oom-b.safetensors', 'oom-c.safetensors', 'oom-e.safetensors']);
      assert.match(d.output(), /GPU 0 is out of memory for [0-9a-f]{12}: evicting an idle set/);
      const held = [await c.acquire({ path: b!.file }), await c.acquire({ path: c3!.file })];
      await assert.rejects(c.acquire({ path: a!.file }), { code: 'CUDA_ERROR_OUT_OF_MEMORY' });
      assert.equal((await c.list()).length, 3, 'leased sets stay');
      for (const h of held) await h.release();
    } finally {
      assert.equal((await d.stop()).code, 143);
    }
  });
});

describe('single flight', () => {
  let range: RangeServer;
  let gate: http.Server;
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  let gatedRequests = 0;
  const model = checkpoint('flight', [{ name: 'w', dtype: 'F32', shape: [256, 64] }, { name: 'b', dtype: 'F32', shape: [64] }]);

  before(async () => {
    range = await new RangeServer().start();
    range.put('/flight.safetensors', fs.readFileSync(model.file));
    // Holds every request until the test opens it, then passes it to the range server.
    gate = http.createServer((req, res) => {
      gatedRequests++;
      void opened.then(() => {
        const fwd = http.request({ host: '127.0.0.1', port: range.port, path: req.url, method: req.method, headers: req.headers }, (up) => {
          res.writeHead(up.statusCode ?? 502, up.headers);
          up.pipe(res);
        });
        fwd.on('error', () => res.destroy());
        req.pipe(fwd);
      });
    });
    await new Promise<void>((resolve) => gate.listen(0, '127.0.0.1', resolve));
  });
  after(async () => {
    await range.stop();
    gate.closeAllConnections();
    await new Promise((r) => gate.close(r));
  });

  test('eight clients asking at once for a set not yet loaded share one load', async () => {
    const d = await startDaemon(['--budget', '16MiB']);
    try {
      await using c = await p.connectServer(d.socket);
      const url = `http://127.0.0.1:${(gate.address() as AddressInfo).port}/flight.safetensors`;
      const clients = await Promise.all(Array.from({ length: 8 }, () => p.connectServer(d.socket)));
      const asked = clients.map((x) => x.acquire({ path: url }));
      await until(async () => (await statsOf(c)).acquires === 8, 'all eight acquires reached the daemon');
      assert.equal((await statsOf(c)).loads, 1);
      assert.equal((await c.list())[0]!.state, 'loading');
      assert.ok(gatedRequests >= 1);
      open();
      const sets = await Promise.all(asked);
      for (const s of sets) assert.equal(sha(await s.get('w')!.buffer.toBuffer()), sha(model.bytes.get('w')!));
      assert.equal(new Set(sets.map((s) => s.manifest.slab.handle)).size, 1);
      assert.equal(sets.filter((s) => s.hit).length, 7);
      const s = await statsOf(c);
      assert.equal(s.loads, 1);
      assert.equal(s.hits, 7);
      assert.equal(s.leases, 8);
      for (const x of clients) await x.close();
      await until(async () => (await statsOf(c)).leases === 0, 'closing ended every lease');
    } finally {
      assert.equal((await d.stop()).code, 143);
    }
  });
});
