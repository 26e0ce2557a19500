/**
 * The doctor against what it must not do: remove a file it did not create, lose a block device
 * that a kernel shows only under /sys/block or /sys/dev/block, or read this machine's files when
 * a recorded root's link points at an absolute path.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { tmpDir } from '../helpers.js';
import { BASE, FACTS, tree } from './trees.js';
import { diagnose, type PlatformFacts } from '../../src/doctor/index.js';

const CLAIMS_GPU: PlatformFacts = {
  cuda: { loaded: true, path: 'libcuda.so.1', initialized: true, driverVersion: 12080, deviceCount: 1 },
  gpus: [{ ordinal: 0, name: 'NVIDIA H100', totalMemory: 80 * 2 ** 30, pciBusId: '0000:ff:00.0', computeCapability: [9, 0] }],
  cufile: { loaded: true, path: 'libcufile.so.0', version: 1150, driverOpen: true, statsLevel: 3 },
};

describe('the directory probe removes only what it created', () => {
  test('files already in the directory under the scratch names are left alone', async () => {
    const dir = fs.mkdtempSync(path.join(tmpDir(), 'planted-'));
    const planted = Array.from({ length: 20 }, (_, i) => path.join(dir, `.penstock-doctor-${process.pid}-${i + 1}.tmp`));
    for (const f of planted) fs.writeFileSync(f, 'precious');
    const script = path.join(tmpDir(), 'probe-ok.mjs');
    const result = { status: 'measured', message: 'read', route: 'posix-device', bytes: 1 };
    fs.writeFileSync(script, `process.stdout.write('penstock-probe-result ' + ${JSON.stringify(JSON.stringify(result))} + '\\n');\n`);
    const r = await diagnose([dir], { probe: true, facts: CLAIMS_GPU, probeScript: script, env: {}, probeBytes: 65536 });
    assert.equal(r.paths[0]!.probe?.status, 'measured');
    for (const f of planted) assert.equal(fs.readFileSync(f, 'utf8'), 'precious', `${path.basename(f)} untouched`);
    assert.deepEqual(fs.readdirSync(dir).sort(), planted.map((f) => path.basename(f)).sort(), 'the scratch file is gone, nothing else is');
  });
});

describe('block devices a kernel shows only in some sysfs views', () => {
  const VDA = '../../devices/pci0000:00/0000:00:05.0/virtio2/block/vda';
  const files = { ...BASE, 'proc/mounts': '/dev/vda / ext4 rw,relatime,data=ordered 0 0\n', 'data/f': 'x', 'run/udev/data/b254:0': 'E:ID_FS_USAGE=filesystem\nE:ID_FS_TYPE=ext4\n' };

  test('/sys/block/NAME/dev without /sys/class/block', async () => {
    const root = tree('sys-block-only', { ...files, 'sys/block/vda/dev': '254:0\n', 'sys/dev/block/254:0': { link: VDA } });
    const p = (await diagnose(['/data/f'], { root, facts: FACTS, env: {} })).paths[0]!;
    assert.equal(p.checks.find((c) => c.id === 'path.block_device')!.data?.kind, 'virtio');
    assert.deepEqual(p.prediction.blockers.map((b) => b.code), ['VIRTIO_DISK']);
  });

  test('only the /sys/dev/block/MAJ:MIN link', async () => {
    const root = tree('sys-dev-block-only', { ...files, 'sys/dev/block/254:0': { link: VDA } });
    const p = (await diagnose(['/data/f'], { root, facts: FACTS, env: {} })).paths[0]!;
    assert.equal(p.checks.find((c) => c.id === 'path.block_device')!.data?.name, 'vda');
    assert.deepEqual(p.prediction.blockers.map((b) => b.code), ['VIRTIO_DISK']);
  });
});

describe('links inside a recorded root', () => {
  test('an absolute link is followed inside the root, not on this machine', async () => {
    const root = tree('alternatives', {
      ...BASE,
      'etc/cufile.json': { link: '/etc/alternatives/cufile.json' },
      'etc/alternatives/cufile.json': { link: '/usr/local/cuda-12.8/gds/cufile.json' },
      'usr/local/cuda-12.8/gds/cufile.json': '{ "properties": { "force_compat_mode": true } }',
    });
    const r = await diagnose(['/'], { root, facts: FACTS, env: {} });
    const cfg = r.platform.find((c) => c.id === 'platform.cufile.config')!;
    assert.equal(cfg.data?.found, true);
    assert.equal(cfg.data?.force_compat_mode, true);
    assert.ok(r.paths[0]!.prediction.blockers.some((b) => b.code === 'CUFILE_COMPAT_FORCED'));
  });

  test("a link to a file the root lacks is missing, even when this machine has one", async () => {
    const root = tree('dangling', { ...BASE, 'etc/cufile.json': { link: '/etc/passwd' }, 'proc/version': { link: '/proc/version' } });
    const r = await diagnose(['/'], { root, facts: FACTS, env: {} });
    assert.equal(r.platform.find((c) => c.id === 'platform.cufile.config')!.data?.found, false);
    assert.equal(r.platform.find((c) => c.id === 'platform.kernel')!.data?.release, undefined);
  });
});
