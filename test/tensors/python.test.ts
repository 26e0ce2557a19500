/**
 * Round trips with the reference implementation where python3 has `safetensors` and numpy:
 * files written by `safetensors.numpy.save_file` load byte-exact, and files written by the test
 * writer (padded, misaligned, with gaps) are read by `safe_open` with the same bytes.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { loadTensors } from '../../src/index.js';
import { tmpDir } from '../helpers.js';
import { writeSafetensors } from '../tensor-writer.js';

const probe = spawnSync('python3', ['-c', 'import numpy, safetensors.numpy'], { encoding: 'utf8' });
const why = probe.status === 0 ? undefined : `python3 with numpy and safetensors is not available here (${(probe.stderr || probe.error?.message || '').trim().split('\n').pop()})`;

describe('against Python safetensors', { skip: why }, () => {
  test('files written by safetensors.numpy.save_file load byte-exact', async () => {
    const f = path.join(tmpDir(), 'py-written.safetensors');
    const script = `
import numpy as np, sys, json, hashlib
from safetensors.numpy import save_file
rng = np.random.default_rng(3)
ts = {}
for i, dt in enumerate(['bool', 'u1', 'i1', 'i2', 'u2', 'f2', 'i4', 'u4', 'f4', 'i8', 'u8', 'f8']):
    ts[f't{i}.{dt}'] = (rng.random((3, 5 + i)) * 100).astype(dt)
ts['empty'] = np.zeros((0, 3), dtype='f4')
save_file(ts, sys.argv[1], metadata={'format': 'np'})
print(json.dumps({k: hashlib.sha256(v.tobytes()).hexdigest() for k, v in ts.items()}))
`;
    const r = spawnSync('python3', ['-c', script, f], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    const want = JSON.parse(r.stdout) as Record<string, string>;
    using set = await loadTensors(f, { host: true });
    assert.equal(set.size, Object.keys(want).length);
    for (const t of set.tensors) assert.equal(crypto.createHash('sha256').update(t.data as Uint8Array).digest('hex'), want[t.name], t.name);
    assert.deepEqual(set.metadata[f], { format: 'np' });
  });

  test('files from the test writer (misaligned data section, reverse order) read the same in safe_open', async () => {
    const f = path.join(tmpDir(), 'js-written.safetensors');
    const { tensors } = writeSafetensors(f, [
      { name: 'a', dtype: 'F32', shape: [4, 3] },
      { name: 'b', dtype: 'I16', shape: [5] },
      { name: 'c', dtype: 'U8', shape: [0] },
    ], { padding: 3, reverse: true });
    const r = spawnSync('python3', ['-c', `
import sys, json, hashlib
from safetensors import safe_open
with safe_open(sys.argv[1], framework='numpy') as st:
    print(json.dumps({k: hashlib.sha256(st.get_tensor(k).tobytes()).hexdigest() for k in st.keys()}))
`, f], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    const py = JSON.parse(r.stdout) as Record<string, string>;
    for (const t of tensors) assert.equal(py[t.name], crypto.createHash('sha256').update(t.data).digest('hex'), t.name);
    fs.rmSync(f);
  });
});
