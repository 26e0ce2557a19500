/**
 * Who may reach the daemon and where it may listen: the socket's folder (0700, this user's, no
 * symbolic link), the socket file (0600), a path already served or holding another file, a stale
 * socket left by a killed daemon, a path that cannot be made, and peers refused by their
 * credentials (SO_PEERCRED, read by the addon).
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { repoRoot, tmpDir, useFakeDriver } from '../helpers.js';
import { cli, failedStart, fakeEnv, socketPath, startDaemon } from './kit.js';
import { native } from '../../src/addon/binding.js';
import { NATIVE_RESULT_FIELDS } from '../../src/vocabulary/native-contract.js';

useFakeDriver({ FAKE_CUDA_DEVICE_COUNT: '1' });
const p = await import('../../src/index.js');

test('the addon reads a Unix socket peer\'s pid, uid and gid (SO_PEERCRED)', async () => {
  const sock = path.join(tmpDir(), 'peer.sock');
  const server = net.createServer();
  await new Promise<void>((r) => server.listen(sock, r));
  const accepted = new Promise<net.Socket>((r) => server.once('connection', r));
  const client = net.connect(sock);
  const s = await accepted;
  const fd = (s as unknown as { _handle: { fd: number } })._handle.fd;
  const cred = native().peerCredentials(fd);
  assert.deepEqual(Object.keys(cred).sort(), Object.keys(NATIVE_RESULT_FIELDS.peerCredentials).sort());
  assert.deepEqual(cred, { pid: process.pid, uid: process.getuid!(), gid: process.getgid!() });
  // A descriptor that is no socket is the OS's error, typed.
  const file = fs.openSync(path.join(repoRoot, 'package.json'), 'r');
  assert.throws(() => native().peerCredentials(file), (e: { record?: { errno?: number; syscall?: string } }) => e.record?.errno === os.constants.errno.ENOTSOCK && e.record.syscall === 'getsockopt');
  fs.closeSync(file);
  client.destroy();
  s.destroy();
  await new Promise((r) => server.close(r));
});

test('the socket lives in a 0700 folder of its own user and is 0600 itself', async () => {
  const d = await startDaemon();
  try {
    assert.equal(fs.statSync(path.dirname(d.socket)).mode & 0o777, 0o700);
    assert.equal(fs.statSync(d.socket).mode & 0o777, 0o600);
    assert.ok(fs.statSync(d.socket).isSocket());
  } finally {
    assert.equal((await d.stop()).code, 143);
  }
});

test('folders others may enter or write to, or reached through a symbolic link, are refused', async () => {
  const open = path.join(tmpDir(), 'open-dir');
  fs.mkdirSync(open, { mode: 0o755 });
  fs.chmodSync(open, 0o755);
  let r = await failedStart(['--socket', path.join(open, 'serve.sock')]);
  assert.equal(r.code, 1);
  assert.match(r.output, /ERR_PENSTOCK_SERVE_UNSAFE_DIR/);
  const writable = path.join(tmpDir(), 'writable-dir');
  fs.mkdirSync(writable);
  fs.chmodSync(writable, 0o733);
  r = await failedStart(['--socket', path.join(writable, 'serve.sock'), '--allow-uid', '12345']);
  assert.match(r.output, /ERR_PENSTOCK_SERVE_UNSAFE_DIR/, 'writable by others is refused even when others are served');
  const real = path.join(tmpDir(), 'real-dir');
  fs.mkdirSync(real, { mode: 0o700 });
  const link = path.join(tmpDir(), 'link-dir');
  fs.symlinkSync(real, link);
  r = await failedStart(['--socket', path.join(link, 'serve.sock')]);
  assert.match(r.output, /ERR_PENSTOCK_SERVE_UNSAFE_DIR/);
  if (process.getuid!() === 0) {
    const foreign = path.join(tmpDir(), 'foreign-dir');
    fs.mkdirSync(foreign, { mode: 0o700 });
    fs.chownSync(foreign, 4321, 4321);
    r = await failedStart(['--socket', path.join(foreign, 'serve.sock')]);
    assert.match(r.output, /ERR_PENSTOCK_SERVE_UNSAFE_DIR/, 'a folder of another user');
  }
});

test('a path already served, or holding another file, is refused; a stale socket is taken over', async () => {
  const d = await startDaemon();
  try {
    const r = await failedStart(['--socket', d.socket]);
    assert.equal(r.code, 1);
    assert.match(r.output, /ERR_PENSTOCK_SERVE_IN_USE/);
    await using c = await p.connectServer(d.socket);
    assert.equal((await c.health()).pid, d.proc.pid, 'the first daemon still serves');
  } finally {
    await d.stop();
  }
  const file = socketPath();
  fs.mkdirSync(path.dirname(file), { mode: 0o700 });
  fs.writeFileSync(file, 'precious');
  const r = await failedStart(['--socket', file]);
  assert.match(r.output, /ERR_PENSTOCK_SERVE_IN_USE/);
  assert.equal(fs.readFileSync(file, 'utf8'), 'precious', 'a file that is not a socket is left alone');
  // A daemon killed outright leaves its socket file; the next one takes the path over.
  const killed = await startDaemon();
  killed.proc.kill('SIGKILL');
  await killed.stop();
  assert.ok(fs.existsSync(killed.socket));
  const next = await startDaemon([], {}, killed.socket);
  await using c = await p.connectServer(next.socket);
  assert.equal((await c.health()).pid, next.proc.pid);
  await c.close();
  assert.equal((await next.stop()).code, 143);
});

test('a socket path that cannot be made is a typed failure', async () => {
  const file = path.join(tmpDir(), 'plain-file');
  fs.writeFileSync(file, '');
  const r = await failedStart(['--socket', path.join(file, 'sub', 'serve.sock')]);
  assert.equal(r.code, 1);
  assert.match(r.output, /\[(ENOTDIR|EEXIST)\]/);
  const usage = await failedStart(['--socket', socketPath(), '--budget', '120%']);
  assert.equal(usage.code, 2);
  assert.match(usage.output, /--budget/);
});

test('peers of other users are refused by their credentials unless allowed', { skip: process.getuid!() !== 0 ? 'needs root to run a client as another user' : false }, async () => {
  const dir = path.join(tmpDir(), `shared-${process.pid}`);
  fs.mkdirSync(dir, { mode: 0o711 });
  fs.chmodSync(dir, 0o711);
  // The test's folders must be enterable by the other users for them to reach the socket.
  for (let x = dir; x !== path.dirname(x); x = path.dirname(x)) if ((fs.statSync(x).mode & 0o001) === 0) fs.chmodSync(x, fs.statSync(x).mode | 0o001);
  const d = await startDaemon(['--allow-uid', '12345'], {}, path.join(dir, 'serve.sock'));
  const entry = path.join(repoRoot, 'dist/src/index.js');
  const asUser = (uid: number) =>
    new Promise<{ code: number | null; out: string }>((resolve) => {
      const child = spawn(process.execPath, ['--input-type=module', '-e', `
        const p = await import(${JSON.stringify(entry)});
        try { const c = await p.connectServer(process.argv[1]); console.log(JSON.stringify({ ok: (await c.health()).protocol })); await c.close(); }
        catch (e) { console.log(JSON.stringify({ code: e.code })); }`, d.socket], { uid, gid: uid, env: fakeEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      child.stdout.on('data', (x: Buffer) => (out += x.toString()));
      child.stderr.on('data', (x: Buffer) => (out += x.toString()));
      child.once('exit', (code) => resolve({ code, out }));
    });
  try {
    assert.equal(fs.statSync(d.socket).mode & 0o777, 0o666, 'with other users served, the folder decides who reaches the socket');
    const refused = await asUser(54321);
    assert.deepEqual(JSON.parse(refused.out.trim().split('\n').at(-1)!), { code: 'ERR_PENSTOCK_SERVE_PEER_REFUSED' }, refused.out);
    const allowed = await asUser(12345);
    assert.deepEqual(JSON.parse(allowed.out.trim().split('\n').at(-1)!), { ok: 1 }, allowed.out);
    await using c = await p.connectServer(d.socket);
    assert.equal((await c.stats()).refusedPeers, 1);
  } finally {
    assert.equal((await d.stop()).code, 143);
  }
});

test('penstock python-path prints the folder of the Python client', async () => {
  const out = await new Promise<string>((resolve) => {
    const child = spawn(process.execPath, [cli, 'python-path'], { stdio: ['ignore', 'pipe', 'inherit'] });
    let s = '';
    child.stdout.on('data', (x: Buffer) => (s += x.toString()));
    child.once('exit', () => resolve(s));
  });
  assert.equal(out.trim(), path.join(repoRoot, 'python'));
  assert.ok(fs.existsSync(path.join(out.trim(), 'penstock_client.py')));
});

test('penstock serve-status lists the resident sets (bytes, GPU, leases, hits, load time) and evicts idle ones', async () => {
  const { checkpoint } = await import('./kit.js');
  const model = checkpoint('status', [{ name: 'w', dtype: 'F32', shape: [64, 64] }]);
  const run = (args: string[]) =>
    new Promise<{ code: number | null; out: string; err: string }>((resolve) => {
      const child = spawn(process.execPath, [cli, 'serve-status', ...args], { env: fakeEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      let err = '';
      child.stdout.on('data', (x: Buffer) => (out += x.toString()));
      child.stderr.on('data', (x: Buffer) => (err += x.toString()));
      child.once('exit', (code) => resolve({ code, out, err }));
    });
  const d = await startDaemon();
  try {
    await using c = await p.connectServer(d.socket);
    const held = await c.acquire({ path: model.file });
    await (await c.acquire({ path: model.file })).release();
    const json = await run(['--socket', d.socket, '--json']);
    assert.equal(json.code, 0, json.err);
    const j = JSON.parse(json.out) as { health: { pid: number }; stats: { leases: number }; sets: { id: string; bytes: number; device: number; leases: number; hits: number; loadSeconds: number; state: string }[] };
    assert.equal(j.health.pid, d.proc.pid);
    assert.equal(j.sets.length, 1);
    assert.deepEqual([j.sets[0]!.bytes, j.sets[0]!.device, j.sets[0]!.leases, j.sets[0]!.hits, j.sets[0]!.state], [64 * 64 * 4, 0, 1, 1, 'resident']);
    assert.ok(j.sets[0]!.loadSeconds > 0);
    const text = await run(['--socket', d.socket]);
    assert.equal(text.code, 0, text.err);
    assert.match(text.out, new RegExp(`^${j.sets[0]!.id}\\t0\\t16 KiB\\t1\\t1\\t[0-9.]+\\tresident\\t.*status\\.safetensors$`, 'm'));
    const refused = await run(['--socket', d.socket, '--evict', j.sets[0]!.id]);
    assert.equal(refused.code, 1);
    assert.match(refused.err, /ERR_PENSTOCK_SERVE_LEASED/);
    await held.release();
    const evicted = await run(['--socket', d.socket, '--evict-idle', '--json']);
    assert.deepEqual((JSON.parse(evicted.out) as { evicted: string[]; sets: unknown[] }).sets, []);
  } finally {
    assert.equal((await d.stop()).code, 143);
  }
  const none = await run(['--socket', d.socket]);
  assert.equal(none.code, 1);
  assert.match(none.err, /no daemon answers on/);
});
