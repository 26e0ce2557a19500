/**
 * CUDA IPC hand-offs on a real GPU: Node → Node and Node → Python (PyTorch, CuPy). Without a GPU
 * they skip with the reason (`npm run test:gpu` makes that a failure); without Python, torch,
 * safetensors or CuPy the Python ones skip with the reason (PENSTOCK_REQUIRE_PYTHON=1 makes that
 * a failure). PENSTOCK_PYTHON names the interpreter (default python3), and
 * PENSTOCK_IPC_CHECKPOINT_SIZE the checkpoint's size (default 512MiB).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test, type TestContext } from 'node:test';
import { digestHex } from '../../src/memory/digest.js';
import { DeviceBuffer, loadTensors } from '../../src/index.js';
import { exportDeviceBuffer, exportTensorSet, importDeviceBuffer } from '../../src/ipc.js';
import { parseSize } from '../../src/measure.js';
import { decoderDimsFor, handOffShapes, writeCheckpointFile } from '../../bench/tensor-checkpoints.js';
import { pattern, repoRoot, tmpDir } from '../helpers.js';
import { importEveryEntry } from '../entry-points.js';
import { fileTensors } from '../tensor-writer.js';
import { gpuOrSkip, python, pythonOrSkip as pythonOrSkipIn } from './guard.js';

const script = path.join(repoRoot, 'test/gpu/ipc_torch.py');
const sha = (b: Uint8Array) => digestHex('sha256', b);
const pythonOrSkip = (t: TestContext, modules: string[]) => pythonOrSkipIn(t, modules);


/** Runs `body` in a fresh node (penstock as `p`, arguments as `args`); returns its last line as JSON. */
function nodeChild(body: string, args: string[]): Record<string, unknown> {
  const prelude = `${importEveryEntry()} const crypto = await import('node:crypto');
    const sha = (b) => crypto.createHash('sha256').update(b).digest('hex'); const args = process.argv.slice(1);\n`;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', prelude + body, ...args], { encoding: 'utf8', timeout: 300_000 });
  assert.equal(r.status, 0, `child failed (${r.status ?? r.signal}):\n${r.stderr}`);
  return JSON.parse(r.stdout.trim().split('\n').at(-1)!) as Record<string, unknown>;
}

let checkpoint: string | undefined;
/** A model-shaped safetensors file (written once), for every test here. */
function modelCheckpoint(): string {
  if (!checkpoint) {
    const size = parseSize(process.env.PENSTOCK_IPC_CHECKPOINT_SIZE ?? '512MiB');
    checkpoint = path.join(tmpDir(), 'ipc-model.safetensors');
    writeCheckpointFile(checkpoint, handOffShapes(decoderDimsFor(size)));
  }
  return checkpoint;
}

describe('GPU: CUDA IPC', () => {
  test('Node → Node: a view in another process, bytes both ways; twice-open one address; own-process open refused', async (t) => {
    if (!gpuOrSkip(t)) return;
    const data = pattern((64 << 20) + 3, 31);
    using buf = DeviceBuffer.alloc(data.length);
    await buf.copyFrom(data);
    const begin = 1 << 20;
    using e = exportDeviceBuffer(buf.subarray(begin, begin + (32 << 20)));
    assert.throws(() => importDeviceBuffer(e.handle), { code: 'ERR_PENSTOCK_IPC_SAME_PROCESS' });
    const reply = pattern(4096, 32);
    const r = nodeChild(
      `const a = p.importDeviceBuffer(args[0]); const b = p.importDeviceBuffer(args[0]);
       const out = { same: a.ptr === b.ptr, sha: sha(await a.toBuffer()) };
       a.free(); out.second = sha(await b.toBuffer());
       await b.copyFrom(Buffer.from(args[1], 'base64')); b.free();
       let raw; try { const { native } = await import(${JSON.stringify(path.join(repoRoot, 'dist/src/addon/binding.js'))});
         const x = p.DeviceBuffer.alloc(4096); const h = p.exportDeviceBuffer(x).handle;
         native().ipcOpenMemHandle(0, Buffer.from(h.handle, 'base64'), 1); raw = 'opened'; } catch (err) { raw = err.record?.code ?? err.code; }
       out.selfOpen = raw;
       console.log(JSON.stringify(out));`,
      [String(e), reply.toString('base64')],
    );
    const want = sha(data.subarray(begin, begin + (32 << 20)));
    assert.equal(r.same, true);
    assert.equal(r.sha, want);
    assert.equal(r.second, want);
    t.diagnostic(`the driver answers an own-process open with ${r.selfOpen}`);
    assert.equal(r.selfOpen, 'CUDA_ERROR_INVALID_CONTEXT');
    const now = await buf.toBuffer();
    assert.ok(now.subarray(begin, begin + 4096).equals(reply));
    assert.ok(now.subarray(begin + 4096).equals(data.subarray(begin + 4096)));
  });

  test('Node → Node: a model-shaped checkpoint loaded and exported in one call, every tensor byte-exact', async (t) => {
    if (!gpuOrSkip(t)) return;
    const file = modelCheckpoint();
    using tensors = await loadTensors(file);
    const t0 = performance.now();
    using exported = exportTensorSet(tensors);
    const exportMs = performance.now() - t0;
    // Through a file: a large manifest is longer than one command-line argument may be.
    const manifest = path.join(tmpDir(), 'ipc-manifest-node.json');
    fs.writeFileSync(manifest, JSON.stringify(exported));
    const r = nodeChild(
      `const text = (await import('node:fs')).readFileSync(args[0], 'utf8');
       p.memoryInfo(0); // the context first: what follows is the opening alone
       const t0 = performance.now(); const set = p.openTensorManifest(text); const openMs = performance.now() - t0;
       const pinned = p.runtimeInfo().pinnedBytes;
       const hashes = {}; for (const [name, t] of set.tensors) hashes[name] = sha(await t.buffer.toBuffer());
       set.close(); console.log(JSON.stringify({ openMs, pinned, hashes }));`,
      [manifest],
    );
    const expected = fileTensors(file);
    const hashes = r.hashes as Record<string, string>;
    for (const [name, bytes] of expected) assert.equal(hashes[name], sha(bytes), name);
    assert.equal(Object.keys(hashes).length, expected.size);
    assert.equal(r.pinned, 0, 'opening pinned no host memory');
    t.diagnostic(`${tensors.size} tensors, ${fs.statSync(file).size} bytes: export ${exportMs.toFixed(2)} ms, open in the other process (context already made) ${(r.openMs as number).toFixed(2)} ms`);
  });

  for (const mode of ['torch', 'cupy'] as const) {
    test(`Node → Python (${mode}): every tensor bitwise equal to safetensors.torch.load_file, no copy`, async (t) => {
      if (!pythonOrSkip(t, mode === 'torch' ? ['torch', 'safetensors'] : ['torch', 'safetensors', 'cupy'])) return;
      const file = modelCheckpoint();
      using tensors = await loadTensors(file);
      using exported = exportTensorSet(tensors);
      const manifest = path.join(tmpDir(), `ipc-manifest-${mode}.json`);
      fs.writeFileSync(manifest, JSON.stringify(exported));
      const r = spawnSync(python, [script, manifest, '--safetensors', file, '--mode', mode], { encoding: 'utf8', timeout: 600_000 });
      const out = JSON.parse(r.stdout.trim().split('\n').at(-1) ?? '{}') as Record<string, number | boolean | unknown[]>;
      assert.equal(r.status, 0, `${r.stderr}\n${r.stdout}`);
      assert.equal(out.ok, true);
      assert.equal(out.tensors, tensors.size);
      assert.equal(out.mismatchCount, 0);
      assert.equal(out.allocatedGrowth, 0, 'torch allocated nothing for the opened tensors');
      assert.ok((out.deviceFreeDrop as number) < fs.statSync(file).size / 4, `GPU memory dropped by ${out.deviceFreeDrop} bytes: a copy?`);
      t.diagnostic(JSON.stringify(out));
    });
  }
});
