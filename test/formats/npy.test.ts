/**
 * .npy files: versions 1–3, C and Fortran order, every accepted dtype, big-endian refused, and
 * round trips against files numpy itself wrote (where python3 with numpy exists).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { loadTensors } from '../../src/index.js';
import { parseNpyHeader } from '../../src/formats.js';
import { tmpDir } from '../helpers.js';
import { tensorBytes, writeNpy } from '../tensor-writer.js';

let n = 0;
const file = (name = 'a') => path.join(tmpDir(), `${name}-${++n}.npy`);

describe('.npy written here', () => {
  for (const version of [1, 2, 3] as const)
    for (const fortran of [false, true])
      test(`version ${version}.0, ${fortran ? 'Fortran' : 'C'} order`, async () => {
        const f = file(`v${version}`);
        const data = tensorBytes(`npy${version}${fortran}`, 3 * 5 * 4);
        writeNpy(f, '<f4', [3, 5], data, { version, fortran });
        using set = await loadTensors(f, { host: true });
        const t = set.tensors[0]!;
        assert.equal(t.name, path.basename(f, '.npy'));
        assert.equal(t.dtype, 'F32');
        assert.deepEqual(t.shape, [3, 5]);
        assert.deepEqual(t.strides, fortran ? [1, 3] : [5, 1]);
        assert.equal(t.fileOffset % 64, 0);
        assert.ok(Buffer.from(t.data as Uint8Array).equals(data));
      });

  test('dtypes map to safetensors names; big-endian and structured types refused with their codes', async () => {
    const map: [string, string, number][] = [['|b1', 'BOOL', 1], ['|i1', 'I8', 1], ['|u1', 'U8', 1], ['<i2', 'I16', 2], ['<u2', 'U16', 2], ['<f2', 'F16', 2], ['<i4', 'I32', 4], ['<u4', 'U32', 4], ['<f4', 'F32', 4], ['<i8', 'I64', 8], ['<u8', 'U64', 8], ['<f8', 'F64', 8], ['<c8', 'C64', 8]];
    for (const [descr, dtype, size] of map) {
      const f = file('dt');
      writeNpy(f, descr, [7], tensorBytes(descr, 7 * size));
      using set = await loadTensors(f, { host: true });
      assert.equal(set.tensors[0]!.dtype, dtype, descr);
    }
    const refused: [string, string][] = [['>f4', 'ERR_PENSTOCK_NPY_BIG_ENDIAN'], ['>i8', 'ERR_PENSTOCK_NPY_BIG_ENDIAN'], ['<U3', 'ERR_PENSTOCK_NPY_UNSUPPORTED_DTYPE'], ['|O', 'ERR_PENSTOCK_NPY_UNSUPPORTED_DTYPE'], ['<c16', 'ERR_PENSTOCK_NPY_UNSUPPORTED_DTYPE']];
    for (const [descr, code] of refused) {
      const f = file('bad');
      writeNpy(f, descr, [2], Buffer.alloc(64));
      await assert.rejects(loadTensors(f, { host: true }), { code }, descr);
    }
    // A big-endian single-byte type has no byte order to get wrong.
    const f = file('be1');
    writeNpy(f, '>u1', [4], Buffer.from([1, 2, 3, 4]));
    using ok = await loadTensors(f, { host: true });
    assert.deepEqual([...(ok.tensors[0]!.data as Uint8Array)], [1, 2, 3, 4]);
  });

  test('malformed headers: magic, version, truncation, dictionary', async () => {
    const good = file('g');
    writeNpy(good, '<f4', [2], Buffer.alloc(8));
    const bytes = fs.readFileSync(good);
    const variants: [Buffer, string][] = [
      [Buffer.concat([Buffer.from('\x93NUMPX', 'latin1'), bytes.subarray(6)]), 'ERR_PENSTOCK_NPY_BAD_MAGIC'],
      [Buffer.concat([bytes.subarray(0, 6), Buffer.from([4, 0]), bytes.subarray(8)]), 'ERR_PENSTOCK_NPY_BAD_VERSION'],
      [bytes.subarray(0, 40), 'ERR_PENSTOCK_NPY_TRUNCATED'],
      [bytes.subarray(0, bytes.length - 1), 'ERR_PENSTOCK_NPY_TRUNCATED'],
      [Buffer.from(bytes.toString('latin1').replace("'shape': (2,)", "'shape': [2x]"), 'latin1'), 'ERR_PENSTOCK_NPY_BAD_HEADER'],
      [Buffer.from(bytes.toString('latin1').replace("'fortran_order'", "'fortran_ordr '"), 'latin1'), 'ERR_PENSTOCK_NPY_BAD_HEADER'],
    ];
    for (const [b, code] of variants) {
      const f = file('m');
      fs.writeFileSync(f, b);
      await assert.rejects(loadTensors(f, { host: true }), { code });
    }
    assert.throws(() => parseNpyHeader(Buffer.from('\x93NUMPY\x01\x00', 'latin1'), 8), { code: 'ERR_PENSTOCK_NPY_TRUNCATED' });
  });
});

const python = spawnSync('python3', ['-c', 'import numpy; print(numpy.__version__)'], { encoding: 'utf8' });
const numpyWhy = python.status === 0 ? undefined : `python3 with numpy is not available here (${(python.stderr || python.error?.message || '').trim().split('\n').pop()})`;

describe('.npy written by numpy', { skip: numpyWhy }, () => {
  test('C and Fortran order, versions 1–3, several dtypes: the same bytes numpy reports', async () => {
    const d = path.join(tmpDir(), `numpy-${++n}`);
    fs.mkdirSync(d);
    const script = `
import numpy as np, sys, json, hashlib
from numpy.lib import format as fmt
d = sys.argv[1]
out = []
rng = np.random.default_rng(7)
cases = [('f4', (3, 5), False, None), ('f2', (4, 6), True, None), ('i8', (2, 3, 4), False, (2, 0)), ('u1', (9,), False, (3, 0)),
         ('bool', (5, 2), True, (1, 0)), ('f8', (0, 3), False, None), ('c8', (2, 2), False, None), ('i2', (), False, None)]
for i, (dt, shape, fortran, version) in enumerate(cases):
    a = (rng.random(shape) * 100).astype(dt)
    if fortran:
        a = np.asfortranarray(a)
    p = f'{d}/a{i}.npy'
    with open(p, 'wb') as f:
        fmt.write_array(f, a, version=version)
    raw = a.tobytes(order='F' if fortran else 'C')
    out.append(dict(path=p, shape=list(a.shape), fortran=fortran, sha=hashlib.sha256(raw).hexdigest(), nbytes=len(raw)))
print(json.dumps(out))
`;
    const r = spawnSync('python3', ['-c', script, d], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    const cases = JSON.parse(r.stdout) as { path: string; shape: number[]; fortran: boolean; sha: string; nbytes: number }[];
    const crypto = await import('node:crypto');
    for (const c of cases) {
      using set = await loadTensors(c.path, { host: true });
      const t = set.tensors[0]!;
      assert.deepEqual(t.shape, c.shape, c.path);
      assert.equal(t.byteLength, c.nbytes);
      assert.equal(crypto.createHash('sha256').update(t.data as Uint8Array).digest('hex'), c.sha, c.path);
      if (c.shape.length === 2) assert.deepEqual(t.strides, c.fortran ? [1, c.shape[0]] : [c.shape[1], 1]);
    }
    // Several .npy files load as one set.
    using all = await loadTensors(cases.map((c) => c.path), { host: true });
    assert.equal(all.size, cases.length);
  });

  test('big-endian arrays numpy wrote are refused with the conversion to make', async () => {
    const f = file('numpy-be');
    const r = spawnSync('python3', ['-c', `import numpy as np; np.save(${JSON.stringify(f)}, np.arange(6, dtype='>f4'))`], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    await assert.rejects(loadTensors(f, { host: true }), (e: Error & { code?: string }) => e.code === 'ERR_PENSTOCK_NPY_BIG_ENDIAN' && /newbyteorder/.test(e.message));
  });
});
