/**
 * CUDA IPC in one process, through the fake driver: what an export holds, the handle's JSON and
 * base64 forms, what cannot be exported, lifetimes, malformed handles and manifests.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { Worker } from 'node:worker_threads';
import { repoRoot, tmpDir, useFakeDriver, withEnv } from '../helpers.js';
import { writeSafetensors, writeSharded } from '../tensor-writer.js';

useFakeDriver();
const p = { ...(await import('../../src/index.js')), ...(await import('../../src/formats.js')), ...(await import('../../src/ipc.js')), ...(await import('../../src/formats/dtypes.js')) };
const { native } = await import('../../src/addon/binding.js');
const { fromNative } = await import('../../src/vocabulary/errors.js');

const MiB = 1 << 20;

test('an export describes the view: 64-byte handle, offset and size, allocation size, GPU and bus id', () => {
  using buf = p.DeviceBuffer.alloc(3 * MiB + 5);
  const view = buf.subarray(4099, 4099 + 1000);
  using e = p.exportDeviceBuffer(view);
  const h = e.handle;
  assert.equal(h.type, 'penstock.cuda-ipc');
  assert.equal(h.version, 1);
  assert.equal(Buffer.from(h.handle, 'base64').length, 64);
  assert.equal(h.offset, 4099);
  assert.equal(h.size, 1000);
  assert.equal(h.allocationSize, 3 * MiB + 5);
  assert.equal(h.device, 0);
  assert.equal(h.pciBusId, p.deviceInfo(0).pciBusId);
  assert.equal(h.pid, process.pid);
  assert.deepEqual(JSON.parse(JSON.stringify(e)), { ...h });
  assert.deepEqual(p.parseIpcHandle(String(e)), { ...h });
  assert.deepEqual(p.parseIpcHandle(JSON.stringify(h)), { ...h });
  assert.equal(p.encodeIpcHandle(h), String(e));
});

test('memory that cannot be exported gets ERR_PENSTOCK_IPC_NOT_EXPORTABLE; freed memory ERR_PENSTOCK_FREED', async () => {
  using owner = p.DeviceBuffer.alloc(MiB);
  const wrapped = p.DeviceBuffer.wrap(owner.ptr + 64n, 4096);
  assert.throws(() => p.exportDeviceBuffer(wrapped), { code: 'ERR_PENSTOCK_IPC_NOT_EXPORTABLE', message: /wraps memory/ });
  assert.throws(() => p.exportDeviceBuffer(wrapped.subarray(8, 16)), { code: 'ERR_PENSTOCK_IPC_NOT_EXPORTABLE' });
  using empty = p.DeviceBuffer.alloc(0);
  assert.throws(() => p.exportDeviceBuffer(empty), { code: 'ERR_PENSTOCK_IPC_NOT_EXPORTABLE', message: /empty/ });
  const freed = p.DeviceBuffer.alloc(4096);
  freed.free();
  assert.throws(() => p.exportDeviceBuffer(freed), { code: 'ERR_PENSTOCK_FREED' });
  assert.throws(() => p.exportDeviceBuffer({} as never), { code: 'ERR_PENSTOCK_INVALID_ARGUMENT' });
  // An allocation the driver says IPC refuses (as it does for pool and VMM memory).
  await withEnv({ FAKE_CUDA_IPC_UNSUPPORTED: '1' }, async () => {
    assert.throws(() => p.exportDeviceBuffer(owner), { code: 'ERR_PENSTOCK_IPC_NOT_EXPORTABLE', message: /cuIpcGetMemHandle/ });
  });
  assert.equal(p.liveIpcExports(), 0);
});

test('an export keeps the memory after free() until its release; the last of several exports frees it', () => {
  const free0 = p.memoryInfo(0).free;
  const buf = p.DeviceBuffer.alloc(8 * MiB);
  const a = p.exportDeviceBuffer(buf);
  const b = p.exportDeviceBuffer(buf.subarray(MiB));
  assert.equal(p.liveIpcExports(), 2);
  buf.free();
  assert.equal(buf.freed, true);
  assert.throws(() => buf.ptr, { code: 'ERR_PENSTOCK_FREED' });
  assert.equal(free0 - p.memoryInfo(0).free, 8 * MiB, 'still allocated while exported');
  a.release();
  assert.equal(a.released, true);
  assert.equal(free0 - p.memoryInfo(0).free, 8 * MiB, 'another export still holds it');
  a.release();
  b.release();
  assert.equal(p.memoryInfo(0).free, free0, 'freed with the last release');
  assert.equal(p.liveIpcExports(), 0);
  // Released first, freed later: free() frees at once.
  const c = p.DeviceBuffer.alloc(MiB);
  p.exportDeviceBuffer(c).release();
  c.free();
  assert.equal(p.memoryInfo(0).free, free0);
});

test('opening a handle in the process that exported it: a typed error (CUDA refuses it too)', () => {
  using buf = p.DeviceBuffer.alloc(MiB);
  using e = p.exportDeviceBuffer(buf);
  assert.throws(() => p.importDeviceBuffer(e.handle), { code: 'ERR_PENSTOCK_IPC_SAME_PROCESS' });
  assert.throws(() => p.importDeviceBuffer(String(e)), { code: 'ERR_PENSTOCK_IPC_SAME_PROCESS' });
  // What the driver itself answers (the fake returns the real driver's code).
  let err: unknown;
  try {
    native().ipcOpenMemHandle(0, Buffer.from(e.handle.handle, 'base64'), 1);
  } catch (x) {
    err = fromNative(x);
  }
  assert.ok(err instanceof p.CudaError);
  assert.equal(err.code, 'CUDA_ERROR_INVALID_CONTEXT');
  assert.equal(err.call, 'cuIpcOpenMemHandle');
});

test('a worker thread of the exporting process is the same process: ERR_PENSTOCK_IPC_SAME_PROCESS', async () => {
  using buf = p.DeviceBuffer.alloc(MiB);
  using e = p.exportDeviceBuffer(buf);
  const entry = path.join(repoRoot, 'dist/src/ipc.js');
  const worker = new Worker(
    `const { parentPort, workerData } = require('node:worker_threads');
     import(workerData.entry).then((p) => {
       try { p.importDeviceBuffer(workerData.handle); parentPort.postMessage('opened'); }
       catch (err) { parentPort.postMessage(err.code); }
     });`,
    { eval: true, workerData: { entry, handle: String(e) } },
  );
  const code = await new Promise((resolve, reject) => worker.once('message', resolve).once('error', reject));
  await worker.terminate();
  assert.equal(code, 'ERR_PENSTOCK_IPC_SAME_PROCESS');
});

test('malformed handles are ERR_PENSTOCK_IPC_BAD_HANDLE, never a driver call', () => {
  using buf = p.DeviceBuffer.alloc(MiB);
  using e = p.exportDeviceBuffer(buf.subarray(16, 48));
  const good = e.toJSON();
  const cases: Array<[string, unknown]> = [
    ['not JSON', '{"type": '],
    ['not base64', '!!not base64!!'],
    ['base64 of garbage', Buffer.from('garbage').toString('base64url')],
    ['null', null],
    ['a number', 42],
    ['an array', [good]],
    ['wrong type', { ...good, type: 'torch.cuda-ipc' }],
    ['future version', { ...good, version: 2 }],
    ['63-byte handle', { ...good, handle: Buffer.alloc(63).toString('base64') }],
    ['handle not a string', { ...good, handle: 12 }],
    ['negative offset', { ...good, offset: -1 }],
    ['fractional size', { ...good, size: 1.5 }],
    ['view past the allocation', { ...good, offset: good.allocationSize - 4, size: 8 }],
    ['empty allocation', { ...good, allocationSize: 0, offset: 0, size: 0 }],
    ['device as a string', { ...good, device: '0' }],
    ['bad bus id', { ...good, pciBusId: 'GPU-0' }],
    ['missing bus id', { ...good, pciBusId: undefined }],
    ['bad exporter id', { ...good, exporter: 'me' }],
    ['pid 0', { ...good, pid: 0 }],
  ];
  for (const [what, input] of cases) {
    assert.throws(() => p.parseIpcHandle(input), { code: 'ERR_PENSTOCK_IPC_BAD_HANDLE' }, what);
    assert.throws(() => p.importDeviceBuffer(input as string), { code: 'ERR_PENSTOCK_IPC_BAD_HANDLE' }, what);
  }
});

test('tensor manifests: records checked against the slab and their dtypes; nothing exported on bad input', () => {
  using slab = p.DeviceBuffer.alloc(4096);
  const before = p.liveIpcExports();
  const bad: Array<[string, unknown[]]> = [
    ['duplicate names', [{ name: 'a', dtype: 'U8', shape: [4], byteOffset: 0 }, { name: 'a', dtype: 'U8', shape: [4], byteOffset: 4 }]],
    ['past the slab', [{ name: 'a', dtype: 'F32', shape: [1024], byteOffset: 4 }]],
    ['length against dtype', [{ name: 'a', dtype: 'BF16', shape: [3, 2], byteOffset: 0, byteLength: 10 }]],
    ['unknown dtype without length', [{ name: 'a', dtype: 'F12', shape: [2], byteOffset: 0 }]],
    ['lower-case dtype', [{ name: 'a', dtype: 'f32', shape: [2], byteOffset: 0 }]],
    ['negative dimension', [{ name: 'a', dtype: 'F32', shape: [-1], byteOffset: 0 }]],
    ['strides of another rank', [{ name: 'a', dtype: 'F32', shape: [2, 2], strides: [1], byteOffset: 0 }]],
    ['strided sub-byte dtype', [{ name: 'a', dtype: 'F4', shape: [2, 4], strides: [1, 2], byteOffset: 0 }]],
    ['odd count of F4', [{ name: 'a', dtype: 'F4', shape: [3], byteOffset: 0 }]],
    ['no name', [{ dtype: 'F32', shape: [2], byteOffset: 0 }]],
    ['fractional offset', [{ name: 'a', dtype: 'F32', shape: [2], byteOffset: 0.5 }]],
    // Sizes come from the one dtype table, which knows these too.
    ['length against C64', [{ name: 'a', dtype: 'C64', shape: [2], byteOffset: 0, byteLength: 12 }]],
    ['length against F8_E5M2FNUZ', [{ name: 'a', dtype: 'F8_E5M2FNUZ', shape: [3], byteOffset: 0, byteLength: 4 }]],
  ];
  for (const [what, records] of bad)
    assert.throws(() => p.buildTensorManifest(slab, records as never), { code: 'ERR_PENSTOCK_IPC_BAD_MANIFEST' }, what);
  assert.equal(p.liveIpcExports(), before);

  using set = p.buildTensorManifest(
    slab.subarray(512),
    [
      { name: 'w', dtype: 'BF16', shape: [4, 3], byteOffset: 0 },
      { name: 'scalar', dtype: 'F32', shape: [], byteOffset: 24 },
      { name: 'packed', dtype: 'F4', shape: [2, 4], byteOffset: 28 },
      { name: 'column', dtype: 'F32', shape: [4], strides: [3], byteOffset: 32 },
      { name: 'custom', dtype: 'X24', shape: [2], byteOffset: 96, byteLength: 6 },
    ],
    { metadata: { format: 'pt' } },
  );
  const m = set.manifest;
  assert.equal(m.slab.offset, 512);
  assert.equal(m.slab.size, 4096 - 512);
  assert.deepEqual(
    m.tensors.map((t) => [t.name, t.strides, t.byteLength]),
    [['w', [3, 1], 24], ['scalar', [], 4], ['packed', [4, 1], 4], ['column', [3], 40], ['custom', [1], 6]],
  );
  assert.deepEqual(p.parseTensorManifest(JSON.stringify(set)), m);
  assert.throws(() => p.parseTensorManifest({ ...m, version: 9 }), { code: 'ERR_PENSTOCK_IPC_BAD_MANIFEST' });
  assert.throws(() => p.parseTensorManifest('{'), { code: 'ERR_PENSTOCK_IPC_BAD_MANIFEST' });
  assert.throws(() => p.parseTensorManifest({ ...m, slab: { ...m.slab, version: 0 } }), { code: 'ERR_PENSTOCK_IPC_BAD_HANDLE' });
  assert.throws(() => p.openTensorManifest(m), { code: 'ERR_PENSTOCK_IPC_SAME_PROCESS' });
});

test('every dtype of the tensor files sizes its manifest records: byte lengths from DTYPE_BITS, C strides', () => {
  using slab = p.DeviceBuffer.alloc(4096);
  const records = p.DTYPES.map((dtype, i) => ({ name: `t.${dtype}`, dtype, shape: [2, 6], byteOffset: 128 * i }));
  using set = p.buildTensorManifest(slab, records);
  assert.deepEqual(
    set.manifest.tensors.map((t) => [t.dtype, t.strides, t.byteLength]),
    p.DTYPES.map((dtype) => [dtype, [6, 1], (12 * p.DTYPE_BITS[dtype]) / 8]),
  );
  // Zero-size tensors take the loader's strides too.
  using empty = p.buildTensorManifest(slab, [{ name: 'e', dtype: 'F32', shape: [3, 0, 2], byteOffset: 0 }]);
  assert.deepEqual(empty.manifest.tensors[0], { name: 'e', dtype: 'F32', shape: [3, 0, 2], strides: p.contiguousStrides([3, 0, 2]), byteOffset: 0, byteLength: 0 });
});

test('exportTensorSet: a loaded set in one call, its layout and merged metadata; what it refuses', async () => {
  const dir = tmpDir();
  const specs = [
    { name: 'w', dtype: 'BF16' as const, shape: [4, 8] },
    { name: 'b', dtype: 'F32' as const, shape: [8] },
    { name: 'n', dtype: 'I64' as const, shape: [] },
  ];
  const file = path.join(dir, 'export-set.safetensors');
  writeSafetensors(file, specs, { metadata: { format: 'pt', step: '7' } });
  const free0 = p.memoryInfo(0).free;
  const set = await p.loadTensors(file);
  const e = p.exportTensorSet(set);
  assert.deepEqual(e.manifest.tensors, set.layout());
  assert.deepEqual(e.manifest.metadata, { format: 'pt', step: '7' });
  assert.equal(e.manifest.slab.offset + e.manifest.slab.size, e.manifest.slab.allocationSize);
  assert.equal(e.manifest.slab.size, (set.slab as import('../../src/index.js').DeviceBuffer).byteLength);
  assert.deepEqual(p.parseTensorManifest(JSON.stringify(e)), e.manifest);
  const bare = p.exportTensorSet(set, { metadata: {} });
  assert.equal(bare.manifest.metadata, undefined, '{} leaves it out');
  // The exports hold the slab past free() until the last release, as any export does.
  const held = free0 - p.memoryInfo(0).free;
  assert.ok(held > 0);
  set.free();
  assert.throws(() => p.exportTensorSet(set), { code: 'ERR_PENSTOCK_TENSOR_SET_FREED' });
  assert.equal(free0 - p.memoryInfo(0).free, held);
  e.release();
  assert.equal(free0 - p.memoryInfo(0).free, held, 'the second export still holds it');
  bare.release();
  assert.equal(p.memoryInfo(0).free, free0);
  assert.equal(p.liveIpcExports(), 0);
  // Sharded files whose metadata disagree need it named; agreeing or disjoint keys merge.
  const { index } = writeSharded(path.join(dir, 'export-shards'), specs, 3);
  const shardFiles = fs.readdirSync(path.join(dir, 'export-shards')).filter((f) => f.endsWith('.safetensors')).sort();
  writeSafetensors(path.join(dir, 'export-shards', shardFiles[0]!), [specs[0]!], { metadata: { format: 'pt', a: '1' } });
  writeSafetensors(path.join(dir, 'export-shards', shardFiles[1]!), [specs[1]!], { metadata: { format: 'pt', b: '2' } });
  using sharded = await p.loadTensors(index);
  using merged = p.exportTensorSet(sharded);
  assert.deepEqual(merged.manifest.metadata, { format: 'pt', a: '1', b: '2' });
  writeSafetensors(path.join(dir, 'export-shards', shardFiles[2]!), [specs[2]!], { metadata: { format: 'np' } });
  using disagreeing = await p.loadTensors(index);
  assert.throws(() => p.exportTensorSet(disagreeing), { code: 'ERR_PENSTOCK_IPC_BAD_MANIFEST', message: /"format"/ });
  using named = p.exportTensorSet(disagreeing, { metadata: { format: 'pt' } });
  assert.deepEqual(named.manifest.metadata, { format: 'pt' });
  assert.throws(() => p.exportTensorSet(disagreeing, { metadata: { n: 1 } as never }), { code: 'ERR_PENSTOCK_IPC_BAD_MANIFEST' });
  // Host sets and things that are not sets.
  using host = await p.loadTensors(file, { host: true });
  assert.throws(() => p.exportTensorSet(host), { code: 'ERR_PENSTOCK_IPC_NOT_EXPORTABLE', message: /host memory/ });
  assert.throws(() => p.exportTensorSet(e as never), { code: 'ERR_PENSTOCK_INVALID_ARGUMENT' });
  assert.throws(() => p.exportTensorSet(sharded, null as never), { code: 'ERR_PENSTOCK_INVALID_ARGUMENT' });
});
