/**
 * CUDA IPC between two Node processes through the fake driver (whose device memory is shared
 * memory, so a second process really maps the exporter's bytes): export here, import in a
 * child, bytes compared exactly both ways, and the failures by code.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import path from 'node:path';
import { test } from 'node:test';
import fs from 'node:fs';
import { handOffShapes, writeCheckpointFile } from '../../bench/tensor-checkpoints.js';
import { fakeDriverDir, makeFile, pattern, repoRoot, tmpDir, useFakeDriver } from '../helpers.js';
import { importEveryEntry } from '../entry-points.js';
import { fileTensors, writeSharded } from '../tensor-writer.js';

useFakeDriver({ FAKE_CUDA_DEVICE_COUNT: '2' });
const p = { ...(await import('../../src/index.js')), ...(await import('../../src/formats.js')), ...(await import('../../src/ipc.js')), ...(await import('../../src/doctor.js')) };

const sha = (b: Uint8Array) => crypto.createHash('sha256').update(b).digest('hex');

/** Prelude of every child: penstock as `p`, the arguments as `args`, and two helpers. */
const prelude = `
${importEveryEntry()}
const fs = await import('node:fs');
const crypto = await import('node:crypto');
const args = process.argv.slice(1);
const sha = (b) => crypto.createHash('sha256').update(b).digest('hex');
// Mappings of the exporter's fake device memory in this process.
const mappings = () => fs.readFileSync('/proc/self/maps', 'utf8').split('\\n').filter((l) => l.includes('fake-cuda-device-${process.pid} ')).length;
const codeOf = (fn) => { try { fn(); return 'no error'; } catch (e) { return e.code; } };
`;

/** Runs `body` in a fresh node with the fake driver; returns its last stdout line as JSON. */
function child(body: string, args: string[] = [], env: Record<string, string | undefined> = {}, flags: string[] = []) {
  const r = spawnSync(process.execPath, [...flags, '--input-type=module', '-e', prelude + body, ...args], {
    env: { ...process.env, FAKE_CUDA_DEVICE_COUNT: '1', FAKE_CUDA_VISIBLE_DEVICES: undefined, ...env },
    encoding: 'utf8',
    timeout: 60_000,
  });
  assert.equal(r.status, 0, `child failed (${r.status ?? r.signal}):\n${r.stderr}`);
  return JSON.parse(r.stdout.trim().split('\n').at(-1) ?? 'null') as Record<string, unknown>;
}

test('a view exported here is the same memory in another process: bytes exact both ways', async () => {
  const data = pattern(MiB(2) + 3, 21);
  using buf = p.DeviceBuffer.alloc(data.length);
  await buf.copyFrom(data);
  const begin = 4097;
  const view = buf.subarray(begin, begin + 300_001);
  using e = p.exportDeviceBuffer(view);
  const reply = pattern(1000, 22);
  const r = child(
    `const b = p.importDeviceBuffer(args[0]);
     const bytes = await b.toBuffer();
     await b.copyFrom(Buffer.from(args[1], 'base64'), { offset: 10 });
     const out = { sha: sha(bytes), length: b.byteLength, device: b.device, owned: b.owned, mappings: mappings() };
     b.free();
     out.after = mappings();
     console.log(JSON.stringify(out));`,
    [String(e), reply.toString('base64')],
  );
  assert.equal(r.sha, sha(data.subarray(begin, begin + 300_001)));
  assert.equal(r.length, 300_001);
  assert.equal(r.device, 0);
  assert.equal(r.owned, false);
  assert.equal(r.mappings, 1);
  assert.equal(r.after, 0, 'free() closed the mapping');
  const now = await buf.toBuffer();
  assert.ok(now.subarray(begin + 10, begin + 1010).equals(reply), 'the importer wrote into the exporter\'s memory');
  assert.ok(now.subarray(0, begin + 10).equals(data.subarray(0, begin + 10)));
  assert.ok(now.subarray(begin + 1010).equals(data.subarray(begin + 1010)));
});

test('one handle opened twice in a process: one mapping, one address, each buffer closes its own open; GC closes too', async () => {
  const data = pattern(MiB(1), 23);
  using buf = p.DeviceBuffer.alloc(data.length);
  await buf.copyFrom(data);
  using e = p.exportDeviceBuffer(buf);
  const r = child(
    `const a = p.importDeviceBuffer(args[0]);
     const b = p.importDeviceBuffer(args[0]);
     const out = { same: a.ptr === b.ptr, both: mappings() };
     a.free();
     out.afterOne = mappings();
     out.stillReadable = sha(await b.toBuffer());
     b.free();
     out.afterBoth = mappings();
     let c = p.importDeviceBuffer(args[0]);
     out.reopened = sha(await c.toBuffer());
     c = undefined;
     for (let i = 0; i < 100 && mappings() > 0; i++) { globalThis.gc(); await new Promise((r) => setTimeout(r, 10)); }
     out.afterGc = mappings();
     console.log(JSON.stringify(out));`,
    [String(e)],
    {},
    ['--expose-gc'],
  );
  assert.deepEqual(r, { same: true, both: 1, afterOne: 1, stillReadable: sha(data), afterBoth: 0, reopened: sha(data), afterGc: 0 });
});

test('GPUs are matched by PCI bus id, not ordinal; another GPU only with peerAccess', async () => {
  const data = pattern(MiB(1), 24);
  using buf = p.DeviceBuffer.alloc(data.length, { device: 1 });
  await buf.copyFrom(data);
  using e = p.exportDeviceBuffer(buf);
  assert.equal(e.handle.device, 1);
  const body = `const out = {};
     try { const b = p.importDeviceBuffer(args[0], JSON.parse(args[1])); out.device = b.device; out.sha = sha(await b.toBuffer()); b.free(); }
     catch (err) { out.code = err.code; }
     console.log(JSON.stringify(out));`;
  // Here physical GPU 1 is ordinal 0, as with CUDA_VISIBLE_DEVICES=1,0.
  assert.deepEqual(child(body, [String(e), '{}'], { FAKE_CUDA_VISIBLE_DEVICES: '1,0' }), { device: 0, sha: sha(data) });
  assert.deepEqual(child(body, [String(e), '{"device":1}'], { FAKE_CUDA_VISIBLE_DEVICES: '1,0' }), { code: 'ERR_PENSTOCK_IPC_WRONG_DEVICE' });
  assert.deepEqual(child(body, [String(e), '{"device":1,"peerAccess":true}'], { FAKE_CUDA_VISIBLE_DEVICES: '1,0' }), { device: 1, sha: sha(data) });
  // Here the exporter's GPU is not visible at all.
  assert.deepEqual(child(body, [String(e), '{}'], { FAKE_CUDA_DEVICE_COUNT: '1' }), { code: 'ERR_PENSTOCK_IPC_DEVICE_NOT_VISIBLE' });
  assert.deepEqual(child(body, [String(e), '{"device":0}'], { FAKE_CUDA_DEVICE_COUNT: '1' }), { code: 'ERR_PENSTOCK_IPC_WRONG_DEVICE' });
  assert.deepEqual(child(body, [String(e), '{"device":0,"peerAccess":true}'], { FAKE_CUDA_DEVICE_COUNT: '1' }), { device: 0, sha: sha(data) });
  assert.deepEqual(child(body, [String(e), '{"device":3}'], { FAKE_CUDA_DEVICE_COUNT: '2' }), { code: 'ERR_PENSTOCK_INVALID_DEVICE' });
});

test('handles whose memory is gone (released and freed, or the exporter exited) fail with the driver\'s error', () => {
  const buf = p.DeviceBuffer.alloc(MiB(1));
  const e = p.exportDeviceBuffer(buf);
  e.release();
  buf.free();
  const body = `let out; try { p.importDeviceBuffer(args[0]); out = { code: 'no error' }; } catch (err) { out = { code: err.code, name: err.name, call: err.call }; } console.log(JSON.stringify(out));`;
  assert.deepEqual(child(body, [String(e)]), { code: 'CUDA_ERROR_INVALID_VALUE', name: 'CudaError', call: 'cuIpcOpenMemHandle' });
  // A handle from a process that has exited.
  const gone = child(`const b = p.DeviceBuffer.alloc(4096); console.log(JSON.stringify({ handle: String(p.exportDeviceBuffer(b)) }));`);
  assert.throws(() => p.importDeviceBuffer(gone.handle as string), { code: 'CUDA_ERROR_INVALID_VALUE', name: 'CudaError' });
});

test('the exporter keeps running when it frees memory a live importer maps; the importer then closes cleanly', async () => {
  const data = pattern(MiB(1), 25);
  const free0 = p.memoryInfo(0).free;
  const buf = p.DeviceBuffer.alloc(data.length);
  await buf.copyFrom(data);
  const e = p.exportDeviceBuffer(buf);
  const proc = spawn(
    process.execPath,
    ['--input-type=module', '-e', prelude + `
      const b = p.importDeviceBuffer(args[0]);
      console.log('ready');
      process.stdin.once('data', async () => {
        const bytes = await b.toBuffer();
        b.free();
        console.log(JSON.stringify({ length: bytes.length, mappings: mappings() }));
        process.exit(0);
      });`, String(e)],
    { env: { ...process.env, FAKE_CUDA_DEVICE_COUNT: '1' }, stdio: ['pipe', 'pipe', 'inherit'] },
  );
  let out = '';
  proc.stdout.setEncoding('utf8');
  await new Promise<void>((resolve) => proc.stdout.on('data', (s: string) => ((out += s), out.includes('ready') && resolve())));
  buf.free();
  e.release();
  assert.equal(p.memoryInfo(0).free, free0, 'the exporter freed its memory');
  using again = p.DeviceBuffer.alloc(MiB(1));
  await again.copyFrom(data);
  assert.ok((await again.toBuffer()).equals(data), 'and goes on working');
  proc.stdin.write('go\n');
  const status = await new Promise<number | null>((resolve) => proc.on('exit', resolve));
  assert.equal(status, 0);
  assert.deepEqual(JSON.parse(out.trim().split('\n').at(-1)!), { length: MiB(1), mappings: 0 });
});

test('imported memory cannot be exported again; a driver without IPC gives ERR_PENSTOCK_IPC_UNSUPPORTED', () => {
  using buf = p.DeviceBuffer.alloc(4096);
  using e = p.exportDeviceBuffer(buf);
  const r = child(`const b = p.importDeviceBuffer(args[0]); console.log(JSON.stringify({ code: codeOf(() => p.exportDeviceBuffer(b.subarray(8))) }));`, [String(e)]);
  assert.deepEqual(r, { code: 'ERR_PENSTOCK_IPC_NOT_EXPORTABLE' });
  const noIpc = child(
    `const b = p.DeviceBuffer.alloc(4096);
     console.log(JSON.stringify({ exp: codeOf(() => p.exportDeviceBuffer(b)), imp: codeOf(() => p.importDeviceBuffer(args[0])), size: b.byteLength }));`,
    [String(e)],
    { PENSTOCK_CUDA_LIBRARY: path.join(fakeDriverDir, 'no-ipc', 'libcuda.so.1') },
  );
  assert.deepEqual(noIpc, { exp: 'ERR_PENSTOCK_IPC_UNSUPPORTED', imp: 'ERR_PENSTOCK_IPC_UNSUPPORTED', size: 4096 });
});

test('a tensor manifest opened in another process: every tensor\'s bytes, metadata, one mapping closed by close()', async () => {
  const data = pattern(8192, 26);
  using buf = p.DeviceBuffer.alloc(data.length + 100);
  await buf.copyFrom(data, { offset: 100 });
  const slab = buf.subarray(100);
  const records = [
    { name: 'embed.weight', dtype: 'BF16', shape: [16, 32], byteOffset: 0 },
    { name: 'norm.weight', dtype: 'F32', shape: [32], byteOffset: 1024 },
    { name: 'step', dtype: 'I64', shape: [], byteOffset: 1152 },
    { name: 'mask', dtype: 'BOOL', shape: [3, 5], byteOffset: 1160 },
  ];
  using set = p.buildTensorManifest(slab, records, { metadata: { format: 'pt' } });
  const r = child(
    `const set = p.openTensorManifest(args[0]);
     const out = { metadata: set.metadata, tensors: {} };
     for (const [name, t] of set.tensors) out.tensors[name] = [t.dtype, t.shape, sha(await t.buffer.toBuffer())];
     out.mappings = mappings();
     set.close();
     out.after = mappings();
     console.log(JSON.stringify(out));`,
    [JSON.stringify(set)],
  );
  const expected: Record<string, unknown> = {};
  for (const t of set.manifest.tensors) expected[t.name] = [t.dtype, t.shape, sha(data.subarray(t.byteOffset, t.byteOffset + t.byteLength))];
  assert.deepEqual(r, { metadata: { format: 'pt' }, tensors: expected, mappings: 1, after: 0 });
});

/** Child body: opens the manifest in args[0]; reports every tensor, the metadata, pinned memory and mappings. */
const openManifest = `
  const set = p.openTensorManifest(args[0]);
  const out = { tensors: {}, metadata: set.metadata, pinned: p.runtimeInfo().pinnedBytes, mappings: mappings() };
  for (const [name, t] of set.tensors) out.tensors[name] = [t.dtype, t.shape, t.strides, sha(await t.buffer.toBuffer())];
  set.close();
  out.after = mappings();
  console.log(JSON.stringify(out));`;

test('exportTensorSet: a model-shaped checkpoint from loadTensors, every tensor byte-exact in another process; the export outlives free() until release', async () => {
  const file = path.join(tmpDir(), 'ipc-small.safetensors');
  const shapes = handOffShapes({ hidden: 64, intermediate: 160, vocab: 100, layers: 2 });
  writeCheckpointFile(file, shapes);
  const free0 = p.memoryInfo(0).free;
  const set = await p.loadTensors(file);
  const exported = p.exportTensorSet(set);
  assert.deepEqual(exported.manifest.tensors, set.layout());
  // What the other process must see: the file's bytes (cut by its header), dtype and shape as written, C order.
  const bytes = fileTensors(file);
  const expected: Record<string, unknown> = {};
  for (const t of shapes) expected[t.name] = [t.dtype, t.shape, p.contiguousStrides(t.shape), sha(bytes.get(t.name)!)];
  assert.equal(Object.keys(expected).length, 2 * 9 + 3 + 5);
  const want = { tensors: expected, metadata: { format: 'pt' }, pinned: 0, mappings: 1, after: 0 };
  assert.deepEqual(child(openManifest, [JSON.stringify(exported)]), want);
  set.free();
  assert.equal(p.liveIpcExports(), 1);
  assert.deepEqual(child(openManifest, [JSON.stringify(exported)]), want, 'after set.free() the export still holds the slab');
  exported.release();
  assert.equal(p.memoryInfo(0).free, free0, 'released: the slab is freed');
});

test('exportTensorSet over a sharded checkpoint: one slab for every shard, tensors byte-exact, metadata as given', async () => {
  const dir = path.join(tmpDir(), 'ipc-sharded');
  const { index, files, tensors } = writeSharded(dir, [
    { name: 'a.weight', dtype: 'BF16', shape: [33, 7] },
    { name: 'b.bias', dtype: 'F32', shape: [5] },
    { name: 'c.table', dtype: 'I64', shape: [3, 2] },
    { name: 'd.flags', dtype: 'BOOL', shape: [9] },
    { name: 'e.packed', dtype: 'F4', shape: [6] },
  ], 3, { metadata: { format: 'pt' } });
  assert.equal(files.length, 3);
  using set = await p.loadTensors(index);
  using exported = p.exportTensorSet(set, { metadata: { source: 'test' } });
  const r = child(openManifest, [JSON.stringify(exported)]);
  const expected: Record<string, unknown> = {};
  for (const t of tensors) expected[t.name] = [t.dtype, t.shape, p.contiguousStrides(t.shape), sha(t.data)];
  assert.deepEqual(r, { tensors: expected, metadata: { source: 'test' }, pinned: 0, mappings: 1, after: 0 });
});

test('memory mapped from another process takes file reads on both device routes; the first one prepares the GPU there', async () => {
  const { file, data } = makeFile(MiB(3) + 11, 27);
  using buf = p.DeviceBuffer.alloc(MiB(4));
  await buf.copyFrom(pattern(MiB(4), 28));
  const begin = 4096;
  using e = p.exportDeviceBuffer(buf.subarray(begin));
  const r = child(
    `const b = p.importDeviceBuffer(args[0]);
     const out = { pinnedBefore: p.runtimeInfo().pinnedBytes };
     const f = await p.open(args[1]);
     p.configure({ gdsThreshold: 1 << 20 });
     await f.read(b, { size: 1000, targetOffset: 7 });            // below the threshold: staged
     await p.prepareGpu(b.device);                                 // cuFile's driver, opening in the background since that read
     await f.read(b, { fileOffset: 1000, targetOffset: 1007 });   // the rest: cuFile
     out.staged = f.stats().routes['posix-device'].bytes;
     out.cufile = f.stats().routes.gds.bytes + f.stats().routes['cufile-compat'].bytes + f.stats().routes['cufile-unknown'].bytes;
     out.prepared = p.runtimeInfo().pinnedBytes > 0;
     await f.close();
     b.free();
     console.log(JSON.stringify(out));`,
    [String(e), file],
  );
  assert.deepEqual(r, { pinnedBefore: 0, staged: 1000, cufile: data.length - 1000, prepared: true });
  const now = await buf.toBuffer();
  assert.ok(now.subarray(begin + 7, begin + 7 + data.length).equals(data), 'the file landed in the exporter\'s memory');
  const before = pattern(MiB(4), 28);
  assert.ok(now.subarray(0, begin + 7).equals(before.subarray(0, begin + 7)));
  assert.ok(now.subarray(begin + 7 + data.length).equals(before.subarray(begin + 7 + data.length)));
});

function MiB(n: number): number {
  return n * (1 << 20);
}
