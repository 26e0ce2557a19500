/**
 * The Python client (python/penstock_client.py) against a daemon with the fake driver: every
 * tensor's bytes as the file holds them, read through the driver from the IPC mapping; the
 * `__cuda_array_interface__` it hands out; close() unmapping and ending the lease; the mapping
 * living while a view lives; a Python process killed while holding a lease; typed errors.
 * Skipped, with the reason, where python3 cannot load the fake driver through ctypes.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { repoRoot, useFakeDriver } from '../helpers.js';
import { checkpoint, fakeEnv, sha, startDaemon, until, type Daemon } from './kit.js';

useFakeDriver({ FAKE_CUDA_DEVICE_COUNT: '1' });
const p = await import('../../src/index.js');

const pythonDir = path.join(repoRoot, 'python');
const env = { ...fakeEnv(), PYTHONPATH: pythonDir };

function whyNoPython(): string | false {
  const r = spawnSync('python3', ['-c', 'import ctypes, os; ctypes.CDLL(os.environ["PENSTOCK_CUDA_LIBRARY"]).cuInit(0); import penstock_client'], { env, encoding: 'utf8' });
  if (r.error) return `python3 cannot be run here (${r.error.message})`;
  if (r.status !== 0) return `python3 cannot load the fake CUDA driver or the client: ${r.stderr.trim().split('\n').at(-1)}`;
  return false;
}
const skip = whyNoPython();

function python(script: string, args: string[]): Record<string, unknown> {
  const r = spawnSync('python3', ['-c', script, ...args], { env, encoding: 'utf8', timeout: 60_000 });
  assert.equal(r.status, 0, `python failed:\n${r.stderr}`);
  return JSON.parse(r.stdout.trim().split('\n').at(-1)!) as Record<string, unknown>;
}

describe('the Python client', { skip }, () => {
  let d: Daemon;
  const model = checkpoint('py', [
    { name: 'embed', dtype: 'BF16', shape: [40, 24] },
    { name: 'norm', dtype: 'F32', shape: [24] },
    { name: 'packed', dtype: 'F4', shape: [16, 8] },
  ]);
  before(async () => {
    d = await startDaemon(['--budget', '16MiB']);
  });
  after(async () => {
    assert.equal((await d.stop()).code, 143);
  });

  test('acquire: bytes equal the file\'s, the array interface points into the mapping, close() unmaps and ends the lease', async () => {
    const r = python(`
import hashlib, json, sys, penstock_client as pc
sock, file, daemon_pid = sys.argv[1], sys.argv[2], sys.argv[3]
maps = lambda: sum(1 for l in open('/proc/self/maps') if f'fake-cuda-device-{daemon_pid} ' in l)
c = pc.connect(sock)
s = c.acquire(file)
out = {"hit": s.hit, "names": list(s.tensors), "sha": {n: hashlib.sha256(t["data"].read_bytes()).hexdigest() for n, t in s.tensors.items()}}
cai = s.tensors["norm"]["data"].__cuda_array_interface__
out["cai"] = {"shape": list(cai["shape"]), "typestr": cai["typestr"], "version": cai["version"], "inside": s._mapping.start <= cai["data"][0] < s._mapping.start + s._mapping.size}
out["dtype"] = s.tensors["embed"]["dtype"]; out["shape"] = s.tensors["embed"]["shape"]
out["mapped"] = maps(); out["leases"] = c.stats()["leases"]
s.close()
out["afterClose"] = {"mapped": maps(), "leases": c.stats()["leases"]}
try:
    s.tensors["norm"]["data"].read_bytes(); out["readAfterClose"] = "no error"
except pc.PenstockServeError as e:
    out["readAfterClose"] = e.code
s2 = c.acquire({"path": file})
view = s2.tensors["embed"]["data"]
del s2
import gc; gc.collect()
out["viewAlive"] = {"leases": c.stats()["leases"], "sha": hashlib.sha256(view.read_bytes()).hexdigest()}
del view; gc.collect()
out["viewGone"] = {"leases": c.stats()["leases"], "mapped": maps()}
for bad in ({"path": "/no/such.safetensors"}, {"path": file, "filter": ["nope"]}, {"path": file, "device": 5}):
    try:
        c.acquire(bad); out.setdefault("errors", []).append("no error")
    except pc.PenstockServeError as e:
        out.setdefault("errors", []).append(e.code)
c.close()
print(json.dumps(out))
`, [d.socket, model.file, String(d.proc.pid)]);
    assert.equal(r.hit, false);
    assert.deepEqual(r.names, ['embed', 'norm', 'packed']);
    assert.deepEqual(r.sha, Object.fromEntries([...model.bytes].map(([n, b]) => [n, sha(b)])));
    assert.deepEqual(r.cai, { shape: [96], typestr: '|u1', version: 3, inside: true });
    assert.equal(r.dtype, 'BF16');
    assert.deepEqual(r.shape, [40, 24]);
    assert.equal(r.mapped, 1);
    assert.equal(r.leases, 1);
    assert.deepEqual(r.afterClose, { mapped: 0, leases: 0 });
    assert.equal(r.readAfterClose, 'ERR_PENSTOCK_FREED');
    assert.deepEqual(r.viewAlive, { leases: 1, sha: sha(model.bytes.get('embed')!) }, 'a live view keeps the mapping and its lease');
    assert.deepEqual(r.viewGone, { leases: 0, mapped: 0 });
    assert.equal((r.errors as string[])[0], 'ENOENT');
    assert.match((r.errors as string[])[1]!, /^ERR_PENSTOCK_/);
    assert.equal((r.errors as string[])[2], 'ERR_PENSTOCK_INVALID_DEVICE');
  });

  test('a Python process killed while holding a lease frees it; state_dict without torch says why', async () => {
    await using c = await p.connectServer(d.socket);
    const leases = async () => Number((await c.stats()).leases);
    const child = spawn('python3', ['-c', `
import sys, time, penstock_client as pc
s = pc.connect(sys.argv[1]).acquire(sys.argv[2])
print("held", flush=True)
time.sleep(600)
`, d.socket, model.file], { env, stdio: ['ignore', 'pipe', 'inherit'] });
    await new Promise<void>((resolve) => child.stdout.once('data', () => resolve()));
    assert.equal(await leases(), 1);
    child.kill('SIGKILL');
    await until(async () => (await leases()) === 0, 'the killed process\'s lease ended');
    const r = python(`
import json, sys, penstock_client as pc
try:
    import torch
    print(json.dumps({"torch": True}))
except ImportError:
    try:
        pc.state_dict(sys.argv[1], sys.argv[2]); print(json.dumps({"torch": False, "error": "none"}))
    except ImportError as e:
        print(json.dumps({"torch": False, "error": "ImportError", "leases": pc.connect(sys.argv[1]).stats()["leases"]}))
`, [d.socket, model.file]);
    if (r.torch === false) assert.deepEqual(r, { torch: false, error: 'ImportError', leases: 0 }, 'the failed state_dict left no lease');
  });
});
