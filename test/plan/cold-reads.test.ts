/**
 * How reads of uncached data are cut, decided from facts alone (no addon, no file): through the
 * page cache, one stripe per worker with no scratch or gather stage; O_DIRECT, warm and mapped
 * reads keep their usual split.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { coldStripe, planRead, type ReadFacts } from '../../src/plan/transfer-plan.js';
import { defaults } from '../../src/settings/config.js';

const MiB = 1 << 20;
const settings = { ...defaults(), threads: 16, directIoRead: 'auto' as const };
const facts = (residency: number, nvme: boolean): ReadFacts => ({
  residency: () => residency,
  fileSize: () => 8 << 30,
  storage: () => ({ device: nvme ? 'nvme0n1' : 'vda', rotational: !nvme, nvme }),
});

describe('cold reads', () => {
  test('a stripe is a worker’s share of the range, whole pages', () => {
    assert.equal(coldStripe({ threads: 16 }, 7_000_834_048), 437_555_200);
    assert.equal(coldStripe({ threads: 16 }, 7_000_834_048) % 4096, 0);
    assert.equal(coldStripe({ threads: 4 }, 70 * MiB - 1), 17.5 * MiB);
    assert.equal(coldStripe({ threads: 0 }, 10 * MiB), 10 * MiB);
  });

  const size = 7_000_834_048;
  const cases: [string, number, boolean, boolean, { direct: boolean; stripe?: number; cold?: object }][] = [
    ['uncached on a virtio disk: page cache, in stripes', 0, false, true, { direct: false, stripe: coldStripe(settings, size), cold: { device: 'vda', direct: false } }],
    ['uncached on NVMe: O_DIRECT, no stripes', 0, true, true, { direct: true, cold: { device: 'nvme0n1', direct: true } }],
    ['cached: neither', 1, false, true, { direct: false }],
    ['a third cached still counts as cold', 0.3, false, false, { direct: false, stripe: coldStripe(settings, size), cold: { device: 'vda', direct: false } }],
  ];
  for (const [name, residency, nvme, intoDevice, want] of cases) {
    test(name, () => {
      const p = planRead(settings, facts(residency, nvme), 0, size, intoDevice, false);
      assert.deepEqual({ direct: p.direct, stripe: p.stripe, cold: p.cold }, { stripe: undefined, cold: undefined, ...want });
    });
  }

  test('small reads are never planned cold', () => {
    const p = planRead(settings, facts(0, false), 0, 16 * MiB, true, false);
    assert.equal(p.stripe, undefined);
    assert.equal(p.cold, undefined);
  });

  test('directIoRead false keeps the page cache and the usual split', () => {
    const p = planRead({ ...settings, directIoRead: false }, facts(0, false), 0, size, true, false);
    assert.deepEqual([p.direct, p.stripe], [false, undefined]);
  });
});
