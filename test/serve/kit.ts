/**
 * What the serve tests share: a daemon (`penstock serve`) in a child process with the fake
 * driver, checkpoints with known bytes, and clients in this process (a different process from
 * the daemon, so CUDA IPC maps the daemon's memory here for real).
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fakeDriverDir, repoRoot, tmpDir } from '../helpers.js';
import { writeSafetensors, type TensorSpec } from '../tensor-writer.js';

export const cli = path.join(repoRoot, 'dist/src/cli/main.js');
export const sha = (b: Uint8Array): string => crypto.createHash('sha256').update(b).digest('hex');

/** The environment of a process that uses the fake driver. */
export function fakeEnv(extra: Record<string, string | undefined> = {}): NodeJS.ProcessEnv {
  return {
    ...process.env,
    PENSTOCK_CUDA_LIBRARY: path.join(fakeDriverDir, 'libcuda.so.1'),
    PENSTOCK_CUFILE_LIBRARY: path.join(fakeDriverDir, 'libcufile.so.0'),
    FAKE_CUDA_DEVICE_COUNT: '1',
    FAKE_CUDA_VISIBLE_DEVICES: undefined,
    ...extra,
  };
}

let n = 0;
/** A fresh folder for one daemon's socket (made by the daemon, 0700). */
export function socketPath(): string {
  return path.join(tmpDir(), `sock${++n}`, 'serve.sock');
}

/** A safetensors checkpoint with known bytes; returns its path and the tensors' bytes. */
export function checkpoint(name: string, specs: TensorSpec[]): { file: string; bytes: Map<string, Buffer> } {
  const dir = path.join(tmpDir(), 'serve-ckpt');
  fs.mkdirSync(dir, { recursive: true });
  const file = path.join(dir, `${name}.safetensors`);
  const { tensors } = writeSafetensors(file, specs);
  return { file, bytes: new Map(tensors.map((t) => [t.name, Buffer.from(t.data)])) };
}

/** A one-tensor checkpoint of about `bytes` bytes (F32). */
export function sizedCheckpoint(name: string, bytes: number): { file: string; bytes: Map<string, Buffer> } {
  return checkpoint(name, [{ name: `${name}.w`, dtype: 'F32', shape: [Math.ceil(bytes / 4)] }]);
}

/** A daemon in a child process. */
export interface Daemon {
  socket: string;
  proc: ChildProcess;
  /** What it has printed so far. */
  output(): string;
  /** SIGTERM, then its exit code (143, as every command stopped so) and output. */
  stop(): Promise<{ code: number | null; signal: NodeJS.Signals | null; output: string }>;
}

/** Starts `penstock serve --socket S ...args` and waits for its "listening" line. */
export async function startDaemon(args: string[] = [], env: Record<string, string | undefined> = {}, socket = socketPath()): Promise<Daemon> {
  const proc = spawn(process.execPath, [cli, 'serve', '--socket', socket, ...args], { env: fakeEnv(env), stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  proc.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  proc.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => proc.once('exit', (code, signal) => resolve({ code, signal })));
  const ready = await Promise.race([
    new Promise<boolean>((resolve) => proc.stdout!.on('data', () => out.includes('listening on') && resolve(true))),
    exited.then(() => false),
  ]);
  assert.ok(ready, `the daemon did not start:\n${out}`);
  return {
    socket,
    proc,
    output: () => out,
    async stop() {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
      const r = await exited;
      return { ...r, output: out };
    },
  };
}

/** Runs `penstock serve ...` expecting it to fail before listening; its exit code and output. */
export function failedStart(args: string[], env: Record<string, string | undefined> = {}): Promise<{ code: number | null; output: string }> {
  const proc = spawn(process.execPath, [cli, 'serve', ...args], { env: fakeEnv(env), stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  proc.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  proc.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  return new Promise((resolve) => proc.once('exit', (code) => resolve({ code, output: out })));
}

/** Polls `check` until it returns true (each try awaits the daemon, so no time is assumed). */
export async function until(check: () => Promise<boolean>, what: string, tries = 2000): Promise<void> {
  for (let i = 0; i < tries; i++) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 5));
  }
  assert.fail(`never happened: ${what}`);
}
