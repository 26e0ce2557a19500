/**
 * The daemon's protocol under bad input, over raw sockets: malformed and mistyped requests get
 * typed answers by id; random lines each get one answer; an oversized line is answered and the
 * connection closed; partial lines, and clients that vanish mid-request, leave nothing behind.
 * After all of it the daemon still serves, its GPU memory is back at its baseline, and it exits 0.
 */
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, test } from 'node:test';
import { useFakeDriver } from '../helpers.js';
import { checkpoint, startDaemon, until, type Daemon } from './kit.js';
import type { ServeClient } from '../../src/index.js';

useFakeDriver({ FAKE_CUDA_DEVICE_COUNT: '1' });
const p = await import('../../src/index.js');

/** A raw connection: write text, read answer lines. */
class Raw {
  readonly socket: net.Socket;
  readonly lines: Record<string, unknown>[] = [];
  #buf = '';
  #waiters: (() => void)[] = [];
  closed = false;

  constructor(path: string) {
    this.socket = net.connect(path);
    this.socket.setEncoding('utf8');
    this.socket.on('data', (d: string) => {
      this.#buf += d;
      for (let nl = this.#buf.indexOf('\n'); nl >= 0; nl = this.#buf.indexOf('\n')) {
        this.lines.push(JSON.parse(this.#buf.slice(0, nl)) as Record<string, unknown>);
        this.#buf = this.#buf.slice(nl + 1);
      }
      this.#wake();
    });
    this.socket.on('error', () => {});
    this.socket.on('close', () => {
      this.closed = true;
      this.#wake();
    });
  }

  #wake(): void {
    for (const w of this.#waiters.splice(0)) w();
  }

  async ready(): Promise<void> {
    if (this.socket.connecting) await new Promise((r) => this.socket.once('connect', r));
  }

  /** Waits until `n` answers have come (or the connection closed). */
  async answers(n: number): Promise<Record<string, unknown>[]> {
    while (this.lines.length < n && !this.closed) await new Promise<void>((r) => this.#waiters.push(r));
    return this.lines;
  }

  async closedByPeer(): Promise<void> {
    while (!this.closed) await new Promise<void>((r) => this.#waiters.push(r));
  }
}

let d: Daemon;
let c: ServeClient;
let baseline: number;
const model = checkpoint('fuzz', [{ name: 'w', dtype: 'F32', shape: [128, 32] }]);
const stats = async () => (await c.stats()) as { connections: number; leases: number; residentBytes: number; devices: { free: number }[] };

before(async () => {
  d = await startDaemon(['--budget', '16MiB']);
  c = await p.connectServer(d.socket);
  baseline = (await stats()).devices[0]!.free;
});
after(async () => {
  await c.close();
  const r = await d.stop();
  assert.equal(r.code, 143, r.output);
});

test('malformed and mistyped requests: one typed answer each, by id where one can be read', async () => {
  const cases: [string, number | null, string][] = [
    ['not json', null, 'ERR_PENSTOCK_SERVE_BAD_REQUEST'],
    ['[1,2]', null, 'ERR_PENSTOCK_SERVE_BAD_REQUEST'],
    ['"text"', null, 'ERR_PENSTOCK_SERVE_BAD_REQUEST'],
    ['{}', null, 'ERR_PENSTOCK_SERVE_VERSION'],
    ['{"v":2,"id":5,"op":"health"}', 5, 'ERR_PENSTOCK_SERVE_VERSION'],
    ['{"v":1,"id":-1,"op":"health"}', null, 'ERR_PENSTOCK_SERVE_BAD_REQUEST'],
    ['{"v":1,"id":1.5,"op":"health"}', null, 'ERR_PENSTOCK_SERVE_BAD_REQUEST'],
    ['{"v":1,"id":6,"op":"reboot"}', 6, 'ERR_PENSTOCK_SERVE_BAD_REQUEST'],
    ['{"v":1,"id":7,"op":"acquire"}', 7, 'ERR_PENSTOCK_SERVE_BAD_REQUEST'],
    ['{"v":1,"id":8,"op":"acquire","set":{"path":"relative.safetensors"}}', 8, 'ERR_PENSTOCK_SERVE_BAD_REQUEST'],
    ['{"v":1,"id":9,"op":"acquire","set":{"path":[]}}', 9, 'ERR_PENSTOCK_SERVE_BAD_REQUEST'],
    ['{"v":1,"id":10,"op":"acquire","set":{"path":42}}', 10, 'ERR_PENSTOCK_SERVE_BAD_REQUEST'],
    ['{"v":1,"id":11,"op":"acquire","set":{"path":"/m","device":-1}}', 11, 'ERR_PENSTOCK_SERVE_BAD_REQUEST'],
    ['{"v":1,"id":12,"op":"acquire","set":{"path":"/m","filter":"x"}}', 12, 'ERR_PENSTOCK_SERVE_BAD_REQUEST'],
    ['{"v":1,"id":13,"op":"acquire","set":{"path":"/m","rows":{"index":2,"count":2}}}', 13, 'ERR_PENSTOCK_SERVE_BAD_REQUEST'],
    ['{"v":1,"id":14,"op":"acquire","set":{"path":"/m","extra":1}}', 14, 'ERR_PENSTOCK_SERVE_BAD_REQUEST'],
    ['{"v":1,"id":15,"op":"acquire","set":{"path":"/m\\u0000x"}}', 15, 'ERR_PENSTOCK_SERVE_BAD_REQUEST'],
    ['{"v":1,"id":16,"op":"release","lease":"nope"}', 16, 'ERR_PENSTOCK_SERVE_BAD_REQUEST'],
    [`{"v":1,"id":17,"op":"release","lease":"${'0'.repeat(32)}"}`, 17, 'ERR_PENSTOCK_SERVE_UNKNOWN_LEASE'],
    ['{"v":1,"id":18,"op":"evict"}', 18, 'ERR_PENSTOCK_SERVE_BAD_REQUEST'],
    ['{"v":1,"id":19,"op":"evict","key":"nothing"}', 19, 'ERR_PENSTOCK_SERVE_UNKNOWN_SET'],
    ['{"v":1,"id":20,"op":"acquire","set":{"path":"/no/such/file.safetensors"}}', 20, 'ENOENT'],
    ['{"v":1,"id":21,"op":"acquire","set":{"path":"s3:/broken"}}', 21, 'ERR_PENSTOCK_SERVE_BAD_REQUEST'],
  ];
  const raw = new Raw(d.socket);
  await raw.ready();
  raw.socket.write(cases.map(([line]) => `${line}\n`).join(''));
  const answers = await raw.answers(cases.length);
  assert.equal(answers.length, cases.length);
  // Answers may come in any order (each request runs on its own); match them by id and code.
  const got = answers.map((a) => `${String(a.id)} ${(a.error as { code: string } | undefined)?.code ?? 'ok'}`).sort();
  assert.deepEqual(got, cases.map(([, id, code]) => `${String(id)} ${code}`).sort());
  for (const a of answers) {
    assert.equal(a.v, 1);
    assert.equal(a.ok, false);
    assert.equal(typeof (a.error as { message: unknown }).message, 'string');
  }
  raw.socket.end();
});

test('random lines and mutated requests: every non-blank line gets exactly one answer, and the daemon carries on', async () => {
  let seed = 0x9e3779b9;
  const rand = () => ((seed = (seed * 1664525 + 1013904223) >>> 0) / 2 ** 32);
  const valid = [
    '{"v":1,"id":1,"op":"health"}',
    '{"v":1,"id":2,"op":"list"}',
    '{"v":1,"id":3,"op":"stats"}',
    '{"v":1,"id":4,"op":"acquire","set":{"path":"/no/such/dir/x.safetensors","filter":["a"],"rows":{"index":0,"count":2}}}',
    `{"v":1,"id":5,"op":"release","lease":"${'a'.repeat(32)}"}`,
  ];
  const lines: string[] = [];
  for (let i = 0; i < 400; i++) {
    if (i % 2 === 0) {
      const bytes = Buffer.from(Array.from({ length: 1 + Math.floor(rand() * 200) }, () => Math.floor(rand() * 256)));
      lines.push(bytes.toString('latin1').replaceAll('\n', ' '));
    } else {
      const chars = [...valid[Math.floor(rand() * valid.length)]!];
      for (let k = 0; k < 1 + Math.floor(rand() * 4); k++) chars[Math.floor(rand() * chars.length)] = String.fromCharCode(32 + Math.floor(rand() * 95));
      lines.push(chars.join(''));
    }
  }
  const expected = lines.filter((l) => Buffer.from(l, 'latin1').toString('utf8').trim() !== '').length;
  const raw = new Raw(d.socket);
  await raw.ready();
  raw.socket.write(Buffer.from(lines.map((l) => `${l}\n`).join(''), 'latin1'));
  const answers = await raw.answers(expected);
  assert.equal(answers.length, expected);
  assert.ok(answers.every((a) => a.v === 1 && typeof a.ok === 'boolean'));
  raw.socket.end();
  assert.equal((await c.health()).protocol, 1);
  const s = await stats();
  assert.equal(s.leases, 0);
  assert.equal(s.residentBytes, 0);
});

test('a line over the limit is answered and the connection closed; partial lines then a hang-up leave nothing', async () => {
  const big = new Raw(d.socket);
  await big.ready();
  big.socket.write(`{"v":1,"id":1,"op":"health","pad":"${'x'.repeat((1 << 20) + 10)}"}\n`);
  await big.closedByPeer();
  assert.equal(big.lines.length, 1);
  assert.equal((big.lines[0]!.error as { code: string }).code, 'ERR_PENSTOCK_SERVE_BAD_REQUEST');
  assert.equal(big.lines[0]!.id, null);
  // The same without any newline at all.
  const endless = new Raw(d.socket);
  await endless.ready();
  for (let i = 0; i < 20 && !endless.closed; i++) endless.socket.write('y'.repeat(128 * 1024));
  await endless.closedByPeer();
  assert.equal((endless.lines[0]!.error as { code: string }).code, 'ERR_PENSTOCK_SERVE_BAD_REQUEST');
  // Partial requests, then gone.
  for (const part of ['{"v":1,"id":1,"op":"acq', '{"v":1,"id":1,"op":"acquire","set":{"path":"' + model.file, '\u00ff\u00fe']) {
    const r = new Raw(d.socket);
    await r.ready();
    r.socket.end(part);
    await r.closedByPeer();
    assert.equal(r.lines.length, 0);
  }
  await until(async () => (await stats()).connections === 1, 'only this test\'s client is still connected');
});

test('a client that vanishes while its set loads gets no lease; the set stays evictable and memory returns to baseline', async () => {
  const acquires0 = Number((await c.stats()).acquires);
  for (let i = 0; i < 5; i++) {
    const r = new Raw(d.socket);
    await r.ready();
    r.socket.write(`${JSON.stringify({ v: 1, id: 1, op: 'acquire', set: { path: model.file } })}\n`);
    r.socket.destroy();
  }
  await until(async () => Number((await c.stats()).acquires) === acquires0 + 5, 'the daemon read the five requests');
  await until(async () => (await c.list()).every((s) => s.state === 'resident') && (await stats()).connections === 1, 'the loads settled and the connections closed');
  const s = await stats();
  assert.equal(s.leases, 0);
  await c.evictIdle();
  const after = await stats();
  assert.equal(after.residentBytes, 0);
  assert.equal(after.devices[0]!.free, baseline);
  await using again = await c.acquire({ path: model.file });
  assert.equal(again.tensors.size, 1);
});
