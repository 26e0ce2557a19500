/**
 * The prebuilt binaries: each an ELF shared object for its architecture that exports the
 * Node-API entry point, and needs no newer glibc or libstdc++ than the README promises.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { MACHINES, newestGlibc, readElf } from './elf.js';
import { repoRoot } from './helpers.js';

/** The oldest C and C++ runtimes the binaries are built to load with (see README, Install). */
const GLIBC_FLOOR: [number, number] = [2, 34];
const GLIBCXX_FLOOR = 29; // GLIBCXX_3.4.29: GCC 11's libstdc++

for (const arch of ['x64', 'arm64'] as const) {
  const file = path.join(repoRoot, 'prebuilds', `linux-${arch}`, 'penstock.glibc.node');
  const skip = fs.existsSync(file) ? false : `${path.relative(repoRoot, file)} not built: run npm run build:prebuilds`;
  describe(`prebuilt linux-${arch}`, { skip }, () => {
    it('is an ELF shared object for this architecture exporting napi_register_module_v1', () => {
      const elf = readElf(file);
      assert.equal(elf.machine, MACHINES[arch]);
      assert.equal(elf.type, 3, 'ET_DYN');
      assert.ok(elf.exported.includes('napi_register_module_v1'));
    });

    it(`needs at most glibc ${GLIBC_FLOOR.join('.')} and GLIBCXX_3.4.${GLIBCXX_FLOOR}`, () => {
      const elf = readElf(file);
      const glibc = newestGlibc(elf)!;
      assert.ok(glibc[0] < GLIBC_FLOOR[0] || (glibc[0] === GLIBC_FLOOR[0] && glibc[1] <= GLIBC_FLOOR[1]), `needs GLIBC_${glibc.join('.')}`);
      const cxx = Object.values(elf.needs).flat().map((v) => /^GLIBCXX_3\.4\.(\d+)$/.exec(v)).filter((m) => m !== null).map((m) => Number(m[1]));
      assert.ok(Math.max(0, ...cxx) <= GLIBCXX_FLOOR, `needs GLIBCXX_3.4.${Math.max(...cxx)}`);
    });
  });
}
