/**
 * Sharded indexes behind http:// whose shard names try to leave the index's folder or origin:
 * each is refused with the index's own code before any request, whatever its spelling, and a
 * token an opener adds never reaches another server. An index URL with user info loads, its
 * password in no message or record. Remote loads count their requests as operations.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { loadTensors, type Source } from '../../../src/index.js';
import { openSource } from '../../../src/remote.js';
import { MAX_INDEX_BYTES } from '../../../src/formats/sharded-index.js';
import { RangeServer } from '../../remote-range-server.js';
import { tmpDir } from '../../helpers.js';
import { writeSafetensors, writeSharded } from '../../tensor-writer.js';

const specs = [
  { name: 'a', dtype: 'F32' as const, shape: [64] },
  { name: 'b', dtype: 'BF16' as const, shape: [8, 8] },
];
const token = 'Bearer s3cr3t-token';
const remote = { remoteWorkers: 0 as const, remoteRetries: 0 };

const home = new RangeServer();
const other = new RangeServer();
let good: { index: Buffer; files: [string, Buffer][]; tensors: ReturnType<typeof writeSharded>['tensors'] };
let foreign: Buffer;

before(async () => {
  await home.start();
  await other.start();
  const d = path.join(tmpDir(), 'remote-index');
  const w = writeSharded(d, specs, 2);
  good = { index: fs.readFileSync(w.index), files: w.files.map((f) => [path.basename(f), fs.readFileSync(f)]), tensors: w.tensors };
  for (const [name, bytes] of good.files) home.put(`/m/ckpt/${name}`, bytes);
  home.put('/m/ckpt/model.safetensors.index.json', good.index);
  // What an escaped name would reach: another tensor file, outside the folder and on another server.
  const f = path.join(d, 'foreign.safetensors');
  writeSafetensors(f, [{ name: 'a', dtype: 'F32', shape: [64] }]);
  foreign = fs.readFileSync(f);
  for (const s of [home, other]) {
    s.put('/m/secret/a.safetensors', foreign);
    s.put('/secret/a.safetensors', foreign);
    s.put('/x.safetensors', foreign);
    s.put('/m/ckpt/x.safetensors', foreign);
  }
});
after(async () => {
  await home.stop();
  await other.stop();
});

/** Opens every location as a remote object whose requests carry the caller's token. */
const withToken = (seen: string[]) => async (location: string): Promise<Source> => {
  seen.push(location);
  return openSource(location, { ...remote, headers: { Authorization: token } });
};

function indexNaming(shard: string): Buffer {
  return Buffer.from(JSON.stringify({ metadata: {}, weight_map: { a: shard } }));
}

describe('shard names that leave the index folder or origin', () => {
  const names = (port: number): string[] => [
    '%2e%2e/%2e%2e/secret/a.safetensors',
    '%2e%2e/secret/a.safetensors',
    '..%2fsecret/a.safetensors',
    '%2E%2E%5Csecret%5Ca.safetensors',
    `\\\\127.0.0.1:${port}\\x.safetensors`,
    `\\/127.0.0.1:${port}/x.safetensors`,
    `/\\127.0.0.1:${port}/x.safetensors`,
    `//127.0.0.1:${port}/x.safetensors`,
    `https:127.0.0.1:${port}/x.safetensors`,
    `http:127.0.0.1:${port}/x.safetensors`,
    `http:x.safetensors`,
    'file:x.safetensors',
    'file:///etc/passwd',
    'a\u0000b.safetensors',
    'x.safetensors?../../secret/a.safetensors',
    'x.safetensors#frag',
  ];

  let n = 0;
  it('every spelling is ERR_PENSTOCK_TENSOR_INDEX_BAD_PATH, and no server sees the token outside the folder', async () => {
    for (const name of names(other.port)) {
      const where = `/m/ckpt/bad-${++n}.index.json`;
      home.put(where, indexNaming(name));
      home.requests.length = 0;
      other.requests.length = 0;
      const opened: string[] = [];
      await assert.rejects(loadTensors(home.url(where), { host: true, openSource: withToken(opened) }), (e: Error & { code?: string }) => {
        assert.equal(e.code, 'ERR_PENSTOCK_TENSOR_INDEX_BAD_PATH', `${JSON.stringify(name)}: ${e.message}`);
        return true;
      });
      assert.deepEqual(opened, [home.url(where)], JSON.stringify(name));
      assert.deepEqual(other.requests, [], JSON.stringify(name));
      assert.ok(home.requests.every((r) => r.path === where), JSON.stringify(name));
    }
  });

  it('a NUL in a local index\'s shard name is the index\'s own code', async () => {
    const d = path.join(tmpDir(), 'nul-index');
    fs.mkdirSync(d, { recursive: true });
    const index = path.join(d, 'model.safetensors.index.json');
    fs.writeFileSync(index, indexNaming('a\u0000.safetensors'));
    await assert.rejects(loadTensors(index, { host: true }), { code: 'ERR_PENSTOCK_TENSOR_INDEX_BAD_PATH' });
  });

  it('shards inside the folder load with the token, sent to the index\'s origin only', async () => {
    home.requests.length = 0;
    other.requests.length = 0;
    const opened: string[] = [];
    const set = await loadTensors(home.url('/m/ckpt/model.safetensors.index.json'), { host: true, openSource: withToken(opened) });
    try {
      for (const t of good.tensors) assert.ok(Buffer.from(set.get(t.name)!.data as Uint8Array).equals(t.data), t.name);
      assert.ok(home.requests.length > 0 && home.requests.every((r) => r.headers.authorization === token));
      assert.deepEqual(other.requests, []);
    } finally {
      set.free();
    }
  });
});

describe('an index URL with user info', () => {
  const password = 'pa:ss@w0rd';
  const withUser = (p: string) => home.url(p).replace('http://', `http://alice:${encodeURIComponent(password)}@`);

  it('loads, sending Basic authentication to its origin, and shows the password nowhere', async () => {
    home.requests.length = 0;
    const set = await loadTensors(withUser('/m/ckpt/model.safetensors.index.json'), { host: true, openSource: (l) => openSource(l, remote) });
    try {
      for (const t of good.tensors) assert.ok(Buffer.from(set.get(t.name)!.data as Uint8Array).equals(t.data), t.name);
      const basic = `Basic ${Buffer.from(`alice:${password}`).toString('base64')}`;
      assert.ok(home.requests.length > 0 && home.requests.every((r) => r.headers.authorization === basic));
      const shown = JSON.stringify({ files: set.files, tensors: set.tensors.map((t) => t.path), metadata: Object.keys(set.metadata) });
      assert.ok(!shown.includes(encodeURIComponent(password)) && !shown.includes(password) && !shown.includes('alice'), shown);
    } finally {
      set.free();
    }
  });

  it('an error about it holds no password', async () => {
    home.put('/m/ckpt/missing.index.json', Buffer.from(JSON.stringify({ weight_map: { a: 'nope.safetensors' } })));
    await assert.rejects(loadTensors(withUser('/m/ckpt/missing.index.json'), { host: true, openSource: (l) => openSource(l, remote) }), (e: Error) => {
      assert.equal((e as Error & { code?: string }).code, 'ERR_PENSTOCK_REMOTE_NOT_FOUND');
      assert.ok(!e.message.includes(encodeURIComponent(password)) && !e.message.includes('alice'), e.message);
      return true;
    });
  });
});

describe('index size', () => {
  it(`an index over ${MAX_INDEX_BYTES / 1024 / 1024} MiB is refused before it is read`, async () => {
    const d = path.join(tmpDir(), 'big-index');
    fs.mkdirSync(d, { recursive: true });
    const index = path.join(d, 'model.safetensors.index.json');
    fs.writeFileSync(index, '');
    fs.truncateSync(index, MAX_INDEX_BYTES + 1);
    await assert.rejects(loadTensors(index, { host: true }), (e: Error & { code?: string }) => {
      assert.equal(e.code, 'ERR_PENSTOCK_TENSOR_INDEX_INVALID');
      assert.match(e.message, /more than the 64 MiB an index may have/);
      return true;
    });
  });
});

describe('records of remote loads', () => {
  it('count each file\'s requests as its operations', async () => {
    const set = await loadTensors(home.url('/m/ckpt/model.safetensors.index.json'), { host: true, openSource: (l) => openSource(l, remote) });
    try {
      for (const f of set.files) {
        assert.ok(Number.isInteger(f.ops) && f.ops > 0, JSON.stringify(f));
        assert.equal(f.routes['remote-host']?.ops, f.ops);
      }
      const totals = set.routeTotals();
      assert.ok(Number.isInteger(totals['remote-host']?.ops) && totals['remote-host']!.ops > 0);
    } finally {
      set.free();
    }
  });
});
