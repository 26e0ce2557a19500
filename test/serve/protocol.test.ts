/** The serve protocol's checks as plain functions: set specs normalised into keys, requests parsed, CLI values read. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { normalizeSpec, parseRequest, specKey } from '../../src/serve/protocol.js';
import { parseBudget, parsePreload } from '../../src/cli/commands/serve.js';

test('specs that name the same set have one key; any difference is another set', () => {
  const a = specKey(normalizeSpec({ path: '/m/a.safetensors', filter: ['y', 'x', 'x'] }));
  assert.equal(specKey(normalizeSpec({ path: ['/m/a.safetensors'], device: 0, filter: ['x', 'y'] })), a);
  for (const other of [
    { path: '/m/a.safetensors', filter: ['x'] },
    { path: '/m/a.safetensors', filter: ['x', 'y'], device: 1 },
    { path: '/m/a.safetensors', filter: { prefix: 'x' } },
    { path: '/m/a.safetensors', filter: ['x', 'y'], rows: { index: 0, count: 2 } },
    { path: ['/m/a.safetensors', '/m/b.safetensors'], filter: ['x', 'y'] },
  ])
    assert.notEqual(specKey(normalizeSpec(other)), a, JSON.stringify(other));
  assert.deepEqual(normalizeSpec({ path: 's3://bucket/m.safetensors' }).path, ['s3://bucket/m.safetensors']);
  assert.deepEqual(normalizeSpec({ path: 'HTTPS://host/m.safetensors' }).path, ['HTTPS://host/m.safetensors']);
});

test('bad specs and requests are ERR_PENSTOCK_SERVE_BAD_REQUEST or _VERSION', () => {
  for (const bad of [null, [], 'x', { path: 'rel' }, { path: ['/a', 3] }, { path: '/a', filter: [] }, { path: '/a', filter: { prefix: 1 } },
    { path: '/a', rows: { index: 0, count: 0 } }, { path: '/a', rows: { index: 0 } }, { path: '/a', device: 1.5 }, { path: '/a', unknown: true }])
    assert.throws(() => normalizeSpec(bad), { code: 'ERR_PENSTOCK_SERVE_BAD_REQUEST' }, JSON.stringify(bad));
  assert.throws(() => parseRequest('{"v":"1","id":1,"op":"health"}'), { code: 'ERR_PENSTOCK_SERVE_VERSION' });
  assert.throws(() => parseRequest('{"v":1,"id":1,"op":"evict","all":"yes"}'), { code: 'ERR_PENSTOCK_SERVE_BAD_REQUEST' });
  assert.deepEqual(parseRequest('{"v":1,"id":3,"op":"evict","all":true}'), { id: 3, op: 'evict', all: true });
  assert.deepEqual(parseRequest('{"v":1,"id":4,"op":"stats","ignored":1}'), { id: 4, op: 'stats' });
});

test('--budget takes a size or a share; --preload a path list or a JSON spec', () => {
  assert.deepEqual(parseBudget('24GiB'), { bytes: 24 * 2 ** 30 });
  assert.deepEqual(parseBudget('80%'), { percent: 80 });
  assert.deepEqual(parseBudget(' 12.5 % '), { percent: 12.5 });
  for (const bad of ['0%', '101%', 'lots', '-1GiB']) assert.throws(() => parseBudget(bad), { name: 'ArgError' }, bad);
  assert.deepEqual(parsePreload('/m/a.safetensors,/m/b.safetensors'), { path: ['/m/a.safetensors', '/m/b.safetensors'] });
  assert.deepEqual(parsePreload('s3://b/k.safetensors'), { path: ['s3://b/k.safetensors'] });
  assert.deepEqual(parsePreload('{"path":"/m/a.safetensors","device":1}'), { path: '/m/a.safetensors', device: 1 });
  assert.throws(() => parsePreload('{nope'), { name: 'ArgError' });
});

test('startServer refuses option keys it does not have, before touching anything', async () => {
  const { startServer } = await import('../../src/serve/server.js');
  await assert.rejects(startServer({ socket: '/nonexistent/dir/s.sock', budgett: { bytes: 1 } } as never), { code: 'ERR_PENSTOCK_UNKNOWN_OPTION', message: /did you mean 'budget'/ });
  await assert.rejects(startServer({ socket: '/nonexistent/dir/s.sock', budget: { bytes: -1 } }), { code: 'ERR_PENSTOCK_INVALID_ARGUMENT' });
});
