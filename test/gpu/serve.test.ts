/**
 * `penstock serve` on a real GPU: the daemon in a child process, a Node client here and PyTorch
 * consumers through python/penstock_client.py. Bytes are compared with the file (Node) and with
 * safetensors' load_file (PyTorch); 20 consumer restarts are timed from a ready CUDA context to
 * the state dict ready, with the daemon's GPU memory and descriptors unchanged across them; two
 * consumers share one copy; a transformers model built from the served weights gives the logits
 * of from_pretrained. Without a GPU these skip with the reason (`npm run test:gpu` makes that a
 * failure); without torch, safetensors or transformers the Python ones skip with the reason
 * (PENSTOCK_REQUIRE_PYTHON=1 makes that a failure). PENSTOCK_PYTHON names the interpreter,
 * PENSTOCK_SERVE_CHECKPOINT_SIZE the checkpoint's size (default 512MiB; 7GiB for the 7B shape).
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test, type TestContext } from 'node:test';
import { connectServer, type ServeClient } from '../../src/index.js';
import { parseSize } from '../../src/measure.js';
import { digestHex } from '../../src/memory/digest.js';
import { decoderDimsFor, handOffShapes, writeCheckpointFile } from '../../bench/tensor-checkpoints.js';
import { repoRoot, tmpDir } from '../helpers.js';
import { fileTensors } from '../tensor-writer.js';
import { gpuOrSkip, python, pythonOrSkip as pythonOrSkipIn } from './guard.js';

const consumer = path.join(repoRoot, 'test/gpu/serve_torch.py');
const cli = path.join(repoRoot, 'dist/src/cli/main.js');
const pyEnv = { ...process.env, PYTHONPATH: [path.join(repoRoot, 'python'), process.env.PYTHONPATH].filter(Boolean).join(':') };
const sha = (b: Uint8Array) => digestHex('sha256', b);
const pythonOrSkip = (t: TestContext, modules: string[]) => pythonOrSkipIn(t, modules, pyEnv);


function consume(mode: string, socket: string, target: string, extra: string[] = []): Record<string, unknown> {
  const r = spawnSync(python, [consumer, mode, socket, target, ...extra], { encoding: 'utf8', env: pyEnv, timeout: 600_000 });
  assert.equal(r.status, 0, `${mode} failed (${r.status ?? r.signal}):\n${r.stderr}`);
  return JSON.parse(r.stdout.trim().split('\n').at(-1)!) as Record<string, unknown>;
}

describe('penstock serve on the GPU', () => {
  let daemon: ChildProcess | undefined;
  let socket: string;
  let client: ServeClient;
  let checkpoint: string;

  before(async () => {
    checkpoint = path.join(tmpDir(), 'serve-model.safetensors');
    socket = path.join(tmpDir(), 'serve-gpu', 'serve.sock');
  });
  after(async () => {
    await client?.close();
    if (daemon && daemon.exitCode === null) {
      daemon.kill('SIGTERM');
      const code = await new Promise((r) => daemon!.once('exit', r));
      assert.equal(code, 143);
    }
  });

  async function start(): Promise<void> {
    if (daemon) return;
    writeCheckpointFile(checkpoint, handOffShapes(decoderDimsFor(parseSize(process.env.PENSTOCK_SERVE_CHECKPOINT_SIZE ?? '512MiB'))));
    daemon = spawn(process.execPath, [cli, 'serve', '--socket', socket], { stdio: ['ignore', 'pipe', 'inherit'] });
    await new Promise<void>((resolve, reject) => {
      let out = '';
      daemon!.stdout!.on('data', (d: Buffer) => (out += d.toString()) && out.includes('listening on') && resolve());
      daemon!.once('exit', (code) => reject(new Error(`the daemon exited (${code}): ${out}`)));
    });
    client = await connectServer(socket);
  }

  const fds = () => fs.readdirSync(`/proc/${daemon!.pid}/fd`).length;
  const stats = async () => (await client.stats()) as { loads: number; hits: number; leases: number; residentBytes: number; devices: { free: number; held: number }[] };

  test('Node: every tensor the daemon hands over equals the file\'s bytes', async (t) => {
    if (!gpuOrSkip(t)) return;
    await start();
    const want = fileTensors(checkpoint);
    const t0 = performance.now();
    await using set = await client.acquire({ path: checkpoint });
    t.diagnostic(`first acquire (load ${((performance.now() - t0) / 1e3).toFixed(3)} s); tensors ${set.tensors.size}`);
    assert.equal(set.tensors.size, want.size);
    for (const [name, bytes] of want) assert.equal(sha(await set.get(name)!.buffer.toBuffer()), sha(bytes), name);
    const t1 = performance.now();
    await using again = await client.acquire({ path: checkpoint });
    t.diagnostic(`second acquire (hit, mapped here) ${(performance.now() - t1).toFixed(2)} ms`);
    assert.equal(again.hit, true);
  });

  test('PyTorch: state_dict() equals load_file, bitwise', async (t) => {
    if (!pythonOrSkip(t, ['torch', 'safetensors'])) return;
    await start();
    const r = consume('check', socket, checkpoint);
    assert.deepEqual(r.mismatches, []);
    assert.equal(r.tensors, fileTensors(checkpoint).size);
  });

  const RESTARTS = Number(process.env.PENSTOCK_SERVE_RESTARTS ?? 20);
  test(`${RESTARTS} consumer restarts: state dict ready in milliseconds; the daemon's GPU memory and descriptors do not grow`, async (t) => {
    if (!pythonOrSkip(t, ['torch', 'safetensors'])) return;
    await start();
    consume('restart', socket, checkpoint); // the set is resident before the baseline
    const fd0 = fds();
    const s0 = await stats();
    const times: number[] = [];
    let loadFile = 0;
    for (let i = 0; i < RESTARTS; i++) {
      const r = consume('restart', socket, checkpoint, i === 0 ? ['--load-file'] : []);
      assert.equal(r.ptrInMapping, true);
      assert.equal(r.allocatedGrowth, 0, 'no torch allocation beyond copies of tensors stored misaligned: the rest are views of the mapping');
      times.push(Number(r.seconds));
      if (i === 0) loadFile = Number(r.loadFileSeconds);
    }
    const sorted = [...times].sort((a, b) => a - b);
    const mid = sorted[Math.floor(sorted.length / 2)]!;
    t.diagnostic(`state dict ready after the CUDA context, ${RESTARTS} restarts: median ${(mid * 1e3).toFixed(1)} ms, min ${(sorted[0]! * 1e3).toFixed(1)} ms, max ${(sorted.at(-1)! * 1e3).toFixed(1)} ms; load_file ${(loadFile * 1e3).toFixed(0)} ms (${(loadFile / mid).toFixed(0)}x); ${(s0.residentBytes / 2 ** 30).toFixed(2)} GiB`);
    const s1 = await stats();
    assert.equal(s1.loads, s0.loads, 'no reload');
    assert.equal(s1.residentBytes, s0.residentBytes);
    assert.equal(s1.leases, s0.leases);
    assert.equal(fds(), fd0, 'no descriptor leaked');
    // GPU memory is device-wide: the consumers' contexts must be gone for it to settle.
    let free = s1.devices[0]!.free;
    for (let i = 0; i < 100 && free !== s0.devices[0]!.free; i++) {
      await new Promise((r) => setTimeout(r, 50));
      free = (await stats()).devices[0]!.free;
    }
    assert.equal(free, s0.devices[0]!.free, 'GPU memory unchanged across the restarts');
  });

  test('two consumers hold one copy', async (t) => {
    if (!pythonOrSkip(t, ['torch', 'safetensors'])) return;
    await start();
    const s0 = await stats();
    const holders = [0, 1].map(() => spawn(python, [consumer, 'hold', socket, checkpoint], { env: pyEnv, stdio: ['pipe', 'pipe', 'inherit'] }));
    const firsts = await Promise.all(holders.map((h) => new Promise<Record<string, unknown>>((resolve) => h.stdout!.once('data', (d: Buffer) => resolve(JSON.parse(d.toString().split('\n')[0]!) as Record<string, unknown>)))));
    assert.deepEqual(firsts[0], firsts[1]);
    const s1 = await stats();
    assert.equal(s1.leases, s0.leases + 2);
    assert.equal(s1.loads, s0.loads);
    assert.equal(s1.residentBytes, s0.residentBytes, 'one copy for both');
    for (const h of holders) h.stdin!.end();
    await Promise.all(holders.map((h) => new Promise((r) => h.once('exit', r))));
    assert.equal((await stats()).leases, s0.leases);
  });

  test('transformers: a model built from the served state dict gives from_pretrained\'s logits', async (t) => {
    if (!pythonOrSkip(t, ['torch', 'safetensors', 'transformers'])) return;
    await start();
    const folder = path.join(tmpDir(), 'tiny-llama');
    consume('make-tiny-llama', '-', folder);
    const r = consume('transformers', socket, folder);
    assert.deepEqual(r.unexpected, []);
    assert.equal(r.equal, true, JSON.stringify(r));
    t.diagnostic(`transformers model from the daemon in ${(Number(r.seconds) * 1e3).toFixed(1)} ms (missing keys: ${JSON.stringify(r.missing)})`);
  });
});
