/**
 * cufile.json as a symbolic link whose target is missing (on a recorded machine root: a target
 * that was not recorded): the doctor says the settings are unknown, never that cuFile uses its
 * defaults, and the P2PDMA line says why the setting is not known.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { BASE, FACTS, tree } from './trees.js';
import { diagnose } from '../../src/doctor/index.js';

test('a dangling cufile.json link: settings unknown, the link target named, a warning', async () => {
  const root = tree('cufile-dangling', { ...BASE, 'etc/cufile.json': { link: '/usr/local/cuda/gds/cufile.json' } });
  const r = await diagnose(['/'], { root, facts: FACTS, env: {} });
  const cfg = r.platform.find((c) => c.id === 'platform.cufile.config')!;
  assert.equal(cfg.status, 'warn');
  assert.match(cfg.summary, /symbolic link to \/usr\/local\/cuda\/gds\/cufile\.json, which the recorded machine root does not hold: cuFile's settings are unknown/);
  assert.doesNotMatch(cfg.summary, /defaults/);
  assert.equal(cfg.data?.found, false);
  const p2p = r.platform.find((c) => c.id === 'platform.p2pdma.readiness')!;
  assert.match(p2p.summary, /use_pci_p2pdma: true in cufile\.json \(unknown: .*symbolic link/);
  const settings = r.platform.find((c) => c.id === 'platform.cufile.settings');
  if (settings) assert.doesNotMatch(settings.summary, /cuFile defaults/);
});

test('an absent cufile.json is still "not found: cuFile uses its defaults"', async () => {
  const root = tree('cufile-absent', { ...BASE, 'etc/cufile.json': null });
  const r = await diagnose(['/'], { root, facts: FACTS, env: {} });
  const cfg = r.platform.find((c) => c.id === 'platform.cufile.config')!;
  assert.match(cfg.summary, /not found: cuFile uses its defaults/);
  assert.equal(cfg.data?.unknown, undefined);
});
