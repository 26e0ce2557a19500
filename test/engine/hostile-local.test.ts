/**
 * Hostile local input to the loader, the engine's open and the formats: options of the wrong
 * type, FIFOs and sockets where files are expected, absurd .npy headers, batches of absurd
 * length, freed sets, descriptors left open by failed loads, malformed manifests and tensors
 * with no elements beside huge dimensions. Each gets a typed error (or works), never a hang,
 * a crash or zeros passed off as data.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { describe, test } from 'node:test';
import { spawnSync } from 'node:child_process';
import { repoRoot, tmpDir, useFakeDriver } from '../helpers.js';
import { writeNpy, writeRawSafetensors, writeSafetensors, writeSharded, type TensorSpec } from '../tensor-writer.js';

useFakeDriver();
const p = { ...(await import('../../src/index.js')), ...(await import('../../src/formats.js')), ...(await import('../../src/ipc.js')), ...(await import('../../src/batch.js')), ...(await import('../../src/measure.js')) };

let n = 0;
const file = (name = 'h', ext = 'safetensors') => path.join(tmpDir(), `${name}-${++n}.${ext}`);
const openFds = () => fs.readdirSync('/proc/self/fd').length;
const specs: TensorSpec[] = [
  { name: 'a', dtype: 'F32', shape: [64, 16] },
  { name: 'b', dtype: 'BF16', shape: [8, 8] },
];

function fifo(): string {
  const f = file('fifo', 'safetensors');
  execFileSync('mkfifo', [f]);
  return f;
}

describe('options of the wrong type', () => {
  test('loadTensors: concurrency NaN, a string or an object is refused before anything is read', async () => {
    const f = file();
    writeSafetensors(f, specs);
    for (const concurrency of [NaN, 'lots', {}, 0, -1, 1.5, Infinity])
      await assert.rejects(p.loadTensors(f, { host: true, concurrency } as never), { code: 'ERR_PENSTOCK_INVALID_ARGUMENT' }, String(concurrency));
    for (const [k, v] of [['coalesceGap', NaN], ['coalesceGap', -1], ['coalesceGap', '1'], ['device', -1], ['device', 0.5], ['device', '0'], ['host', 'yes'], ['rows', null], ['openSource', 5], ['signal', {}]] as const)
      await assert.rejects(p.loadTensors(f, { host: true, [k]: v } as never), { code: 'ERR_PENSTOCK_INVALID_ARGUMENT' }, `${k}=${String(v)}`);
    using set = await p.loadTensors(f, { host: true, concurrency: 1 });
    assert.equal(set.size, 2);
  });

  test('loadTensors: an onProgress that is not a function is refused up front (no uncaught throw later)', async () => {
    const f = file();
    writeSafetensors(f, specs);
    await assert.rejects(p.loadTensors(f, { host: true, onProgress: 5 } as never), { code: 'ERR_PENSTOCK_INVALID_ARGUMENT', message: /onProgress/ });
    await assert.rejects(p.loadShards([], { onProgress: 'x' } as never), { code: 'ERR_PENSTOCK_INVALID_ARGUMENT' });
    await assert.rejects(p.readFileToHost(f, { onProgress: 5 } as never), { code: 'ERR_PENSTOCK_INVALID_ARGUMENT' });
  });

  test('filter: null (or another non-filter) is a typed error', async () => {
    const f = file();
    writeSafetensors(f, specs);
    for (const filter of [null, 5, 'a', { prefix: 3 }, [1]])
      await assert.rejects(p.loadTensors(f, { host: true, filter } as never), { code: 'ERR_PENSTOCK_INVALID_ARGUMENT' }, String(filter));
    const cp = await p.describeCheckpoint(f);
    try {
      assert.throws(() => p.planLoad(cp, { filter: null } as never), { code: 'ERR_PENSTOCK_INVALID_ARGUMENT' });
    } finally {
      await p.closeCheckpoint(cp);
    }
  });
});

describe('files that are not regular files', () => {
  test('a FIFO as a checkpoint, as a shard, or to open/read/write is refused without blocking', async () => {
    const pipe = fifo();
    await assert.rejects(p.loadTensors(pipe, { host: true }), { code: 'ERR_PENSTOCK_NOT_REGULAR_FILE', message: /FIFO/ });
    await assert.rejects(p.open(pipe, 'r'), { code: 'ERR_PENSTOCK_NOT_REGULAR_FILE' });
    await assert.rejects(p.open(pipe, 'r+'), { code: 'ERR_PENSTOCK_NOT_REGULAR_FILE' });
    // Write-only with no reader: the kernel says ENXIO at once; penstock says what the path is.
    await assert.rejects(p.open(pipe, 'w'), { code: 'ERR_PENSTOCK_NOT_REGULAR_FILE' });
    await assert.rejects(p.readFileToHost(pipe), { code: 'ERR_PENSTOCK_NOT_REGULAR_FILE' });
    await assert.rejects(p.writeFile(pipe, Buffer.alloc(4)), { code: 'ERR_PENSTOCK_NOT_REGULAR_FILE' });
    await assert.rejects(p.pageCacheResidency(pipe), { code: 'ERR_PENSTOCK_NOT_REGULAR_FILE' });

    const dir = path.join(tmpDir(), `fifo-shard-${++n}`);
    const { index, files } = writeSharded(dir, specs, 2);
    fs.rmSync(files[1]!);
    execFileSync('mkfifo', [files[1]!]);
    const before = openFds();
    await assert.rejects(p.loadTensors(index, { host: true }), { code: 'ERR_PENSTOCK_NOT_REGULAR_FILE' });
    assert.equal(openFds(), before);
  });

  test('penstock inspect and load of a FIFO exit at once with the reason', () => {
    const pipe = fifo();
    const cli = path.join(repoRoot, 'dist/src/cli/main.js');
    for (const args of [['inspect', pipe], ['load', pipe, '--host']]) {
      const r = spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', timeout: 60_000, env: { ...process.env, PENSTOCK_CUDA_LIBRARY: '/nonexistent/libcuda.so.1' } });
      assert.equal(r.signal, null, `${args[0]} did not end on its own`);
      assert.notEqual(r.status, 0);
      assert.match(r.stderr, /FIFO|not a regular file/);
    }
  });

  test('a socket and a character device are refused too; a directory stays EISDIR', async () => {
    const sock = path.join(tmpDir(), `s-${++n}.safetensors`);
    const server = net.createServer();
    await new Promise<void>((resolve) => server.listen(sock, resolve));
    try {
      await assert.rejects(p.loadTensors(sock, { host: true }), { code: 'ERR_PENSTOCK_NOT_REGULAR_FILE', message: /socket/ });
    } finally {
      server.close();
    }
    await assert.rejects(p.open('/dev/null', 'r'), { code: 'ERR_PENSTOCK_NOT_REGULAR_FILE', message: /character device/ });
    await assert.rejects(p.open(tmpDir(), 'r'), { code: 'EISDIR' });
  });

  test('a regular file opened through the check reads and writes as before, O_NONBLOCK gone', async () => {
    const f = file('plain', 'bin');
    const data = Buffer.from('abcdefghijklmnop');
    assert.equal(await p.writeFile(f, data), 16);
    await using h = await p.open(f, 'r');
    const flags = fs.readFileSync(`/proc/self/fdinfo/${h.fd}`, 'utf8').match(/flags:\s+(\d+)/)![1]!;
    assert.equal(parseInt(flags, 8) & fs.constants.O_NONBLOCK, 0);
    const out = Buffer.alloc(16);
    assert.equal(await h.read(out), 16);
    assert.ok(out.equals(data));
    await assert.rejects(p.open(f, 'wx'), { code: 'EEXIST' });
  });
});

describe('.npy headers', () => {
  test('deep nesting is a typed error, not a stack overflow', async () => {
    for (const open of ['(', '[']) {
      const f = file('deep', 'npy');
      const dict = `{'descr': ${open.repeat(5000)}, 'fortran_order': False, 'shape': (1,), }`;
      const head = Buffer.alloc(10);
      Buffer.from([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 1, 0]).copy(head);
      head.writeUInt16LE(dict.length, 8);
      fs.writeFileSync(f, Buffer.concat([head, Buffer.from(dict, 'latin1'), Buffer.alloc(8)]));
      await assert.rejects(p.loadTensors(f, { host: true }), { code: 'ERR_PENSTOCK_NPY_TOO_DEEP' });
    }
    const text = `{'descr': '<f4', 'fortran_order': False, 'shape': ${'('.repeat(40)}1${')'.repeat(40)}, }`;
    const bytes = Buffer.concat([Buffer.from([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 1, 0, text.length & 0xff, text.length >> 8]), Buffer.from(text, 'latin1')]);
    assert.throws(() => p.parseNpyHeader(bytes, bytes.length + 4), { code: 'ERR_PENSTOCK_NPY_TOO_DEEP' });
  });

  test('a header length past 10 000 bytes is refused before it is read', async () => {
    for (const len of [10_001, 1 << 30, 0xfffffff0, 0xffffffff]) {
      const f = file('long', 'npy');
      const head = Buffer.alloc(12);
      Buffer.from([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 2, 0]).copy(head);
      head.writeUInt32LE(len, 8);
      fs.writeFileSync(f, head);
      // The file is sparse: as long as the header says, so only the limit refuses it.
      fs.truncateSync(f, 12 + len + 16);
      await assert.rejects(p.loadTensors(f, { host: true }), { code: 'ERR_PENSTOCK_NPY_HEADER_TOO_LARGE' }, String(len));
    }
    // At the limit, a header is still read (and here found malformed: all spaces).
    const f = file('edge', 'npy');
    writeNpy(f, '<f4', [2], Buffer.alloc(8));
    using set = await p.loadTensors(f, { host: true });
    assert.equal(set.size, 1);
  });
});

describe('batches, freed sets, descriptors', () => {
  test('readBatch of an array of length 2^32-1 is a typed error before any allocation', async () => {
    const f = file('batch', 'bin');
    fs.writeFileSync(f, Buffer.alloc(64));
    await using h = await p.open(f);
    const ranges = new Array(2 ** 32 - 1);
    await assert.rejects(async () => p.readBatch(ranges, { file: h }), { code: 'ERR_PENSTOCK_INVALID_ARGUMENT', message: /at most/ });
  });

  test('verifyTensorSet of a freed set (pinned host, plain host) is ERR_PENSTOCK_TENSOR_SET_FREED', async () => {
    const f = file();
    writeSafetensors(f, specs);
    for (const host of ['pinned', true] as const) {
      const set = await p.loadTensors(f, { host });
      assert.ok((await p.verifyTensorSet(set)).every((c) => c.match));
      set.free();
      await assert.rejects(p.verifyTensorSet(set), { code: 'ERR_PENSTOCK_TENSOR_SET_FREED' }, String(host));
    }
  });

  test('a failed load of many shards closes every shard it opened', async () => {
    const many: TensorSpec[] = Array.from({ length: 60 }, (_, i) => ({ name: `t${i}`, dtype: 'F32', shape: [4] }));
    const dir = path.join(tmpDir(), `leak-${++n}`);
    const { index, files } = writeSharded(dir, many, 60);
    fs.rmSync(files[37]!);
    const before = openFds();
    for (let i = 0; i < 5; i++) await assert.rejects(p.loadTensors(index, { host: true }), { code: 'ENOENT' });
    assert.equal(openFds(), before);
  });

  test('600 shards under ulimit -n 256: EMFILE, and afterwards every descriptor is closed and files open again', () => {
    const many: TensorSpec[] = Array.from({ length: 600 }, (_, i) => ({ name: `t${i}`, dtype: 'U8', shape: [1] }));
    const dir = path.join(tmpDir(), `emfile-${++n}`);
    const { index } = writeSharded(dir, many, 600);
    const script = `
      import fs from 'node:fs';
      const p = await import(${JSON.stringify(path.join(repoRoot, 'dist/src/index.js'))});
      const count = () => fs.readdirSync('/proc/self/fd').length;
      const before = count();
      let code;
      try { await p.loadTensors(${JSON.stringify(index)}, { host: true }); } catch (e) { code = e.code; }
      const after = count();
      const h = await p.open(${JSON.stringify(index)});
      await h.close();
      console.log(JSON.stringify({ code, before, after }));`;
    const r = spawnSync('bash', ['-c', `ulimit -n 256 && exec "${process.execPath}" --input-type=module -e "$0"`, script], { encoding: 'utf8', timeout: 120_000 });
    assert.equal(r.status, 0, r.stderr);
    const out = JSON.parse(r.stdout.trim().split('\n').pop()!) as { code: string; before: number; after: number };
    assert.equal(out.code, 'EMFILE');
    assert.equal(out.after, out.before);
  });

  test('loadTensors([path, source]) closes the file it opened for the path and leaves the source open', async () => {
    const f1 = file();
    const f2 = file();
    writeSafetensors(f1, [specs[0]!]);
    writeSafetensors(f2, [specs[1]!]);
    const src = await p.open(f2);
    const before = openFds();
    {
      using set = await p.loadTensors([f1, src], { host: true });
      assert.equal(set.size, 2);
    }
    assert.equal(openFds(), before);
    assert.equal(src.closed, false);
    await src.close();
  });
});

describe('manifests and empty tensors', () => {
  test('a record whose byteLength is 3.5, NaN or negative is refused, strided or not', () => {
    using slab = p.DeviceBuffer.alloc(4096);
    const base = { name: 'x', dtype: 'F32', shape: [4], byteOffset: 0 };
    for (const strides of [undefined, [3]])
      for (const byteLength of [3.5, NaN, -4, '16', Infinity, 1e300])
        assert.throws(() => p.buildTensorManifest(slab, [{ ...base, ...(strides ? { strides } : {}), byteLength } as never]), { code: 'ERR_PENSTOCK_IPC_BAD_MANIFEST' }, `${strides} ${byteLength}`);
    for (const byteLength of [3.5, NaN]) assert.throws(() => p.buildTensorManifest(slab, [{ name: 'x', dtype: 'X24', shape: [2], byteOffset: 0, byteLength } as never]), { code: 'ERR_PENSTOCK_IPC_BAD_MANIFEST' });
    // A strided view shorter than its strides reach is refused; as long or longer, kept.
    assert.throws(() => p.buildTensorManifest(slab, [{ ...base, strides: [3], byteLength: 39 }]), { code: 'ERR_PENSTOCK_IPC_BAD_MANIFEST' });
    using ok = p.buildTensorManifest(slab, [{ ...base, strides: [3], byteLength: 48 }]);
    assert.equal(ok.manifest.tensors[0]!.byteLength, 48);
  });

  test('a manifest whose record has byteLength 3.5 is refused before anything is mapped', () => {
    using slab = p.DeviceBuffer.alloc(4096);
    using e = p.buildTensorManifest(slab, [{ name: 'x', dtype: 'F32', shape: [4], strides: [3], byteOffset: 0 }]);
    for (const byteLength of [3.5, NaN, null]) {
      const m = JSON.parse(JSON.stringify(e.manifest));
      m.tensors[0].byteLength = byteLength;
      assert.throws(() => p.parseTensorManifest(m), { code: 'ERR_PENSTOCK_IPC_BAD_MANIFEST' });
      // Refused by the checks, not by the mapping (which in this process would say SAME_PROCESS).
      assert.throws(() => p.openTensorManifest(m), { code: 'ERR_PENSTOCK_IPC_BAD_MANIFEST' });
    }
  });

  test('tensors with no elements beside huge dimensions: exact integer strides, and the set exports', async () => {
    const f = file('empty');
    const big = 2 ** 40;
    writeRawSafetensors(f, JSON.stringify({ e: { dtype: 'F32', shape: [0, big, big], data_offsets: [0, 0] }, f: { dtype: 'F32', shape: [big, big, 0], data_offsets: [0, 0] }, w: { dtype: 'F32', shape: [2], data_offsets: [0, 8] } }), 8);
    const npy = file('empty', 'npy');
    writeNpy(npy, '<f4', [0, big, big], Buffer.alloc(0));
    for (const host of [true, false]) {
      using set = await p.loadTensors([f, npy], host ? { host } : {});
      for (const t of set.tensors) assert.ok(t.strides.every((s) => Number.isSafeInteger(s) && s >= 0), `${t.name} ${t.strides}`);
      assert.deepEqual(set.get('e')!.strides, [0, big, 1]);
      if (!host) {
        using e = p.exportTensorSet(set);
        assert.equal(e.manifest.tensors.length, 4);
      }
    }
  });
});
