/**
 * Unknown option keys are refused, as configure() refuses unknown settings: with their own code,
 * the nearest known key, and before anything is read, written, created or truncated.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { tmpDir, useFakeDriver } from '../helpers.js';
import { writeSafetensors } from '../tensor-writer.js';

useFakeDriver();
const p = { ...(await import('../../src/index.js')), ...(await import('../../src/formats.js')), ...(await import('../../src/ipc.js')), ...(await import('../../src/batch.js')), ...(await import('../../src/measure.js')) };
const { OPTION_KEYS, checkOptionKeys } = await import('../../src/settings/option-keys.js');

let n = 0;
const file = (ext = 'bin') => path.join(tmpDir(), `opt-${++n}.${ext}`);
const unknown = (key: string, near?: string) => ({
  code: 'ERR_PENSTOCK_UNKNOWN_OPTION',
  message: near ? new RegExp(`'${key}'.*did you mean '${near}'`) : new RegExp(`'${key}'`),
});

test('file.read({ offset }) and file.write({ offset }) are refused, pointing at fileOffset; nothing is read or written', async () => {
  const f = file();
  fs.writeFileSync(f, Buffer.from('0123456789'));
  await using h = await p.open(f, 'r+');
  const out = Buffer.alloc(5, 0x2e);
  await assert.rejects(h.read(out, { offset: 5 } as never), unknown('offset', 'fileOffset'));
  assert.equal(out.toString(), '.....');
  await assert.rejects(h.write(Buffer.from('xx'), { offset: 5 } as never), unknown('offset', 'fileOffset'));
  await assert.rejects(h.read(out, { fileOfset: 5 } as never), unknown('fileOfset', 'fileOffset'));
  await assert.rejects(h.read(out, { sourceOffset: 1 } as never), unknown('sourceOffset'));
  await assert.rejects(h.write(out, { targetOffset: 1 } as never), unknown('targetOffset'));
  assert.equal(fs.readFileSync(f, 'utf8'), '0123456789');
  assert.equal(await h.read(out, { fileOffset: 5 }), 5);
  assert.equal(out.toString(), '56789');
});

test("writeFile(p, b, { flags: 'wx' }) is refused and the existing file is left whole", async () => {
  const f = file();
  fs.writeFileSync(f, 'keep me');
  await assert.rejects(p.writeFile(f, Buffer.from('gone'), { flags: 'wx' } as never), unknown('flags'));
  assert.equal(fs.readFileSync(f, 'utf8'), 'keep me');
  await assert.rejects(p.readFileToHost(f, { pinnned: true } as never), unknown('pinnned', 'pinned'));
  await assert.rejects(p.readFileToDevice(f, { devce: 0 } as never), unknown('devce', 'device'));
  await assert.rejects(p.open(f, 'r', { flags: 'w' } as never), unknown('flags'));
  await assert.rejects(p.pageCacheResidency(f, { fileOffset: 0 } as never), unknown('fileOffset', 'offset'));
});

test('the loader, batches, shards, checks and exports refuse unknown keys', async () => {
  const f = file('safetensors');
  writeSafetensors(f, [{ name: 'w', dtype: 'F32', shape: [4] }]);
  await assert.rejects(p.loadTensors(f, { host: true, devcie: 0 } as never), unknown('devcie', 'device'));
  await assert.rejects(p.loadTensors(f, { host: true, prefix: 'w' } as never), unknown('prefix'));
  await assert.rejects(p.describeCheckpoint(f, { signl: undefined } as never), unknown('signl', 'signal'));
  await using h = await p.open(f);
  await assert.rejects(async () => p.readBatch([], { files: h } as never), unknown('files', 'file'));
  const into = Buffer.alloc(4, 0x2e);
  await assert.rejects(async () => p.readBatch([{ fileOffset: 0, size: 4, target: into, targetOfset: 2 } as never, { fileOffset: 0, size: 4, target: into }], { file: h }), {
    code: 'ERR_PENSTOCK_UNKNOWN_OPTION',
    message: /ranges\[0\] has no option 'targetOfset' \(did you mean 'targetOffset'\?\)/,
  });
  assert.equal(into.toString(), '....');
  await assert.rejects(p.loadShards([], { mdoe: 'settle' } as never), unknown('mdoe', 'mode'));
  using set = await p.loadTensors(f, { host: true });
  await assert.rejects(p.verifyTensorSet(set, { open: undefined } as never), unknown('open'));
  using dev = await p.loadTensors(f);
  assert.throws(() => p.exportTensorSet(dev, { meta: {} } as never), unknown('meta', 'metadata'));
  const cp = await p.describeCheckpoint(f);
  try {
    assert.throws(() => p.planLoad(cp, { gap: 0 } as never), unknown('gap'));
  } finally {
    await p.closeCheckpoint(cp);
  }
});

test('GPU memory and IPC options: unknown keys refused before any allocation or mapping', async () => {
  assert.throws(() => p.DeviceBuffer.alloc(16, { gpu: 0 } as never), { code: 'ERR_PENSTOCK_UNKNOWN_OPTION' });
  using buf = p.DeviceBuffer.alloc(16);
  await assert.rejects(buf.copyTo(Buffer.alloc(16), { fileOffset: 0 } as never), unknown('fileOffset', 'offset'));
  await assert.rejects(buf.copyFrom(Buffer.alloc(16), { size: 4 } as never), unknown('size'));
  assert.throws(() => p.importDeviceBuffer('x', { peer: true } as never), unknown('peer', 'peerAccess'));
  assert.throws(() => p.openTensorManifest('x', { devices: 0 } as never), unknown('devices', 'device'));
});

test('the table: every listed key is accepted, values of undefined count as keys, non-objects are refused', () => {
  for (const [fn, keys] of Object.entries(OPTION_KEYS)) {
    checkOptionKeys(fn as keyof typeof OPTION_KEYS, Object.fromEntries(keys.map((k: string) => [k, undefined])));
    assert.throws(() => checkOptionKeys(fn as keyof typeof OPTION_KEYS, { zzz: undefined }), { code: 'ERR_PENSTOCK_UNKNOWN_OPTION' });
  }
  assert.throws(() => checkOptionKeys('read', null), { code: 'ERR_PENSTOCK_INVALID_ARGUMENT' });
  assert.throws(() => checkOptionKeys('read', [1]), { code: 'ERR_PENSTOCK_INVALID_ARGUMENT' });
  // Inherited keys are not the caller's options.
  checkOptionKeys('read', Object.create({ offset: 5 }));
});
