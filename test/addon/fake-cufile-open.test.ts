/**
 * Whether cuFile's driver is opened, against the fake driver, each case in a fresh process (the
 * driver's state is the process's): never where the machine's facts say cuFile could only stage
 * (no nvidia-fs, no P2PDMA, compat forced), without a load waiting for it where it may help, at
 * once where compatMode 'off' requires it; the route record and `doctor` give the same reason.
 */
import { fakeDriverDir, fakeSystemRoot, repoRoot, tmpDir } from '../helpers.js';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { writeSafetensors } from '../tensor-writer.js';
import { importEveryEntry } from '../entry-points.js';

const dir = tmpDir();
const checkpoint = path.join(dir, 'model.safetensors');
writeSafetensors(checkpoint, [
  { name: 'embed', dtype: 'BF16', shape: [512, 1024] },
  { name: 'norm', dtype: 'F32', shape: [1024] },
  { name: 'proj', dtype: 'BF16', shape: [1024, 768] },
]);

interface ChildAnswer {
  same: boolean;
  routes: string[];
  fallback?: string;
  second?: { fallback?: string; routes: string[] };
  open: string;
  doctor: { open: string; code?: string; blockers: string[] };
}

// A fresh process: loads the checkpoint into GPU 0, compares every tensor with the file, and
// (with `second`) waits for full preparation, then loads it again; also asks doctor.
const CHILD = `
${importEveryEntry()}
const { fileTensors } = await import(${JSON.stringify(path.join(repoRoot, 'dist/test/tensor-writer.js'))});
const file = process.argv[1];
const want = fileTensors(file);
const set = await p.loadTensors(file, { device: 0 });
let same = true;
for (const t of set.tensors) if (!Buffer.from(await t.data.toBuffer()).equals(want.get(t.name))) same = false;
const rec = set.files[0];
const out = { same, routes: Object.keys(rec.routes), fallback: rec.fallbacks[0]?.code, open: p.runtimeInfo().cufileOpen.open };
set.free();
if (process.env.SECOND) {
  await p.prepareGpu(0);
  const again = await p.loadTensors(file, { device: 0 });
  out.second = { fallback: again.files[0].fallbacks[0]?.code, routes: Object.keys(again.files[0].routes) };
  again.free();
}
const report = await p.diagnose([file]);
const plan = report.platform.find((c) => c.id === 'platform.cufile.open');
out.doctor = { open: plan.data.open, code: plan.data.code, blockers: report.paths[0].prediction.blockers.map((b) => b.code) };
console.log(JSON.stringify(out));
`;

function fresh(env: Record<string, string>): { answer: ChildAnswer; opens: number } {
  const log = path.join(fs.mkdtempSync(path.join(dir, 'opens-')), 'opens.log');
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', CHILD, checkpoint], {
    encoding: 'utf8',
    env: {
      ...process.env,
      PENSTOCK_CUDA_LIBRARY: path.join(fakeDriverDir, 'libcuda.so.1'),
      PENSTOCK_CUFILE_LIBRARY: path.join(fakeDriverDir, 'libcufile.so.0'),
      FAKE_CUFILE_OPEN_LOG: log,
      ...env,
    },
  });
  assert.equal(r.status, 0, r.stderr);
  const opens = fs.existsSync(log) ? fs.readFileSync(log, 'utf8').split('\n').filter(Boolean).length : 0;
  return { answer: JSON.parse(r.stdout.trim().split('\n').at(-1)!) as ChildAnswer, opens };
}

describe("cuFile's driver open, decided from the machine's facts", () => {
  test('without nvidia-fs or P2PDMA it is never opened, even when opening would take 500 ms; the load is staged and byte-exact, and doctor agrees', () => {
    const { answer, opens } = fresh({ PENSTOCK_SYSTEM_ROOT: fakeSystemRoot({ nvidiaFs: false }), FAKE_CUFILE_DRIVER_OPEN_DELAY_MS: '500' });
    assert.equal(opens, 0);
    assert.equal(answer.same, true);
    assert.deepEqual(answer.routes, ['posix-device']);
    assert.equal(answer.fallback, 'CUFILE_NO_DIRECT_PATH');
    assert.equal(answer.open, 'never');
    assert.equal(answer.doctor.open, 'never');
    assert.equal(answer.doctor.code, 'CUFILE_NO_DIRECT_PATH');
    assert.ok(answer.doctor.blockers.includes('CUFILE_NO_DIRECT_PATH'), answer.doctor.blockers.join());
  });

  test("cuFile's forced compat mode (CUFILE_FORCE_COMPAT_MODE) keeps it closed, with its own reason", () => {
    const { answer, opens } = fresh({ PENSTOCK_SYSTEM_ROOT: fakeSystemRoot({ nvidiaFs: true }), CUFILE_FORCE_COMPAT_MODE: 'true' });
    assert.equal(opens, 0);
    assert.equal(answer.same, true);
    assert.equal(answer.fallback, 'CUFILE_COMPAT_FORCED');
    assert.equal(answer.doctor.code, 'CUFILE_COMPAT_FORCED');
  });

  test('with nvidia-fs the open (500 ms) runs in the background: the first load is staged meanwhile and says so; once open, loads reach cuFile', () => {
    const { answer, opens } = fresh({ PENSTOCK_SYSTEM_ROOT: fakeSystemRoot({ nvidiaFs: true }), FAKE_CUFILE_DRIVER_OPEN_DELAY_MS: '500', SECOND: '1' });
    assert.equal(opens, 1);
    assert.equal(answer.same, true);
    assert.equal(answer.open, 'background');
    assert.equal(answer.fallback, 'CUFILE_OPENING');
    assert.deepEqual(answer.routes, ['posix-device']);
    assert.equal(answer.second?.fallback, undefined);
    assert.ok(answer.second!.routes.every((r) => r === 'gds' || r.startsWith('cufile')), answer.second!.routes.join());
    assert.equal(answer.doctor.open, 'background');
    assert.ok(!answer.doctor.blockers.some((b) => b.startsWith('CUFILE_')), answer.doctor.blockers.join());
  });

  test('PCI P2PDMA enabled in cufile.json is a direct path too: opened', () => {
    const root = fakeSystemRoot({ nvidiaFs: false, cufileJson: { properties: { use_pci_p2pdma: true } } });
    const { answer, opens } = fresh({ PENSTOCK_SYSTEM_ROOT: root, SECOND: '1' });
    assert.equal(opens, 1);
    assert.equal(answer.open, 'background');
    assert.equal(answer.second?.fallback, undefined);
  });

  test("compatMode 'off' requires cuFile: opened before the first read, whatever the facts say", () => {
    const { answer, opens } = fresh({ PENSTOCK_SYSTEM_ROOT: fakeSystemRoot({ nvidiaFs: false }), PENSTOCK_COMPAT_MODE: 'off' });
    assert.equal(opens, 1);
    assert.equal(answer.same, true);
    assert.equal(answer.open, 'now');
    assert.equal(answer.fallback, undefined);
    assert.ok(answer.routes.every((r) => r === 'gds' || r.startsWith('cufile')), answer.routes.join());
  });

  test("compatMode 'on' never opens it, with the compat reason", () => {
    const { answer, opens } = fresh({ PENSTOCK_SYSTEM_ROOT: fakeSystemRoot({ nvidiaFs: true }), PENSTOCK_COMPAT_MODE: 'on' });
    assert.equal(opens, 0);
    assert.equal(answer.fallback, 'COMPAT_MODE_ON');
  });
});

