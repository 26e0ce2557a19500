/**
 * The prebuilt binaries: each an ELF shared object for its architecture that exports only the
 * Node-API entry points, needs no newer glibc than the README promises and no libstdc++ of the
 * system's, and really loads with an old glibc: the glibc 2.17 of the sysroot it was linked
 * against, run by that glibc's own dynamic loader (under qemu-user for arm64).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { PREBUILT_GLIBC_FLOOR } from '../../src/addon/load-message.js';
import { MACHINES, newestGlibc, readElf } from './elf.js';
import { repoRoot } from '../helpers.js';

/** The oldest glibc the binaries must load with (RHEL/Rocky 8, Debian 10; see README, Install). */
const GLIBC_FLOOR = PREBUILT_GLIBC_FLOOR.split('.').map(Number) as [number, number];
/** The oldest libgcc_s: GCC 8's (RHEL 8). */
const GCC_FLOOR = [8, 0];
/** glibc functions at most as new as the floor that a binary may take unversioned (glibc 2.18). */
const UNVERSIONED_GLIBC = new Set(['__cxa_thread_atexit_impl']);

const SETUP = {
  x64: { triple: 'x86_64-unknown-linux-gnu', cc: 'gcc', libDirs: ['lib64', 'usr/lib64'], loader: 'lib64/ld-linux-x86-64.so.2' },
  arm64: { triple: 'aarch64-unknown-linux-gnu', cc: 'aarch64-linux-gnu-gcc', libDirs: ['lib', 'usr/lib'], loader: 'lib/ld-linux-aarch64.so.1' },
} as const;

const older = (v: number[], floor: number[]) => v[0]! < floor[0]! || (v[0] === floor[0] && v[1]! <= floor[1]!);

/** The sysroot build-prebuilds unpacked for this target (node_modules/.cache), if any. */
function cachedSysroot(triple: string): string | undefined {
  const cache = path.join(repoRoot, 'node_modules/.cache/penstock-sysroot');
  for (const d of fs.existsSync(cache) ? fs.readdirSync(cache) : []) {
    const s = path.join(cache, d, triple, 'sysroot');
    if (fs.existsSync(path.join(s, 'usr/include/features.h'))) return s;
  }
  return undefined;
}

function onPath(tool: string): boolean {
  return (process.env.PATH ?? '').split(path.delimiter).some((d) => d && fs.existsSync(path.join(d, tool)));
}

const PROBE = `#include <dlfcn.h>
#include <stdio.h>
#include <gnu/libc-version.h>
int main(int argc, char** argv) {
  void* h = dlopen(argv[1], RTLD_LAZY | RTLD_LOCAL);
  if (!h) { printf("{\\"error\\":\\"%s\\"}\\n", dlerror()); return 1; }
  printf("{\\"glibc\\":\\"%s\\",\\"entry\\":%s}\\n", gnu_get_libc_version(), dlsym(h, "napi_register_module_v1") ? "true" : "false");
  return 0;
}
`;

for (const arch of ['x64', 'arm64'] as const) {
  const file = path.join(repoRoot, 'prebuilds', `linux-${arch}`, 'penstock.glibc.node');
  const skip = fs.existsSync(file) ? false : `${path.relative(repoRoot, file)} not built: run npm run build:prebuilds`;
  describe(`prebuilt linux-${arch}`, { skip }, () => {
    it('is an ELF shared object for this architecture exporting only the Node-API entry points', () => {
      const elf = readElf(file);
      assert.equal(elf.machine, MACHINES[arch]);
      assert.equal(elf.type, 3, 'ET_DYN');
      assert.deepEqual(elf.exported.sort(), ['napi_register_module_v1', 'node_api_module_get_api_version_v1']);
    });

    it(`needs at most glibc ${PREBUILT_GLIBC_FLOOR} and no libstdc++`, () => {
      const elf = readElf(file);
      const glibc = newestGlibc(elf)!;
      assert.ok(older(glibc, GLIBC_FLOOR), `needs GLIBC_${glibc.join('.')}`);
      const versions = Object.values(elf.needs).flat();
      assert.deepEqual(versions.filter((v) => /^(GLIBCXX|CXXABI)_/.test(v)), [], 'no libstdc++ versions');
      assert.equal(Object.keys(elf.needs).some((lib) => lib.startsWith('libstdc++')), false);
      for (const v of versions.map((x) => /^GCC_(\d+)\.(\d+)/.exec(x)).filter((m) => m !== null))
        assert.ok(older([Number(v[1]), Number(v[2])], GCC_FLOOR), `needs ${v[0]} of libgcc_s`);
    });

    it('takes every symbol from Node.js or, with a version, from glibc', () => {
      const loose = readElf(file).imported.filter(
        (s) => !s.weak && !s.version && !/^(napi|node_api)_/.test(s.name) && !UNVERSIONED_GLIBC.has(s.name),
      );
      assert.deepEqual(loose.map((s) => s.name), [], 'symbols that an older glibc may lack');
    });

    it('loads with the glibc 2.17 of its sysroot', (t) => {
      const s = SETUP[arch];
      const sysroot = cachedSysroot(s.triple);
      if (!sysroot) return t.skip(`no ${s.triple} sysroot in node_modules/.cache (npm run build:prebuilds fetches it)`);
      if (!onPath(s.cc)) return t.skip(`${s.cc} is not on PATH`);
      const qemu = ['/usr/bin/qemu-aarch64-static', '/usr/bin/qemu-aarch64'].find((q) => fs.existsSync(q));
      if (arch === 'arm64' && !qemu) return t.skip('qemu-user-static is not installed');
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'penstock-oldglibc-'));
      try {
        // Stand-ins for the Node-API functions (Node.js is not there): the probe only loads the file.
        const napi = readElf(file).imported.filter((x) => /^(napi|node_api)_/.test(x.name));
        fs.writeFileSync(path.join(dir, 'probe.c'), PROBE + napi.map((x) => `int ${x.name}(void) { return 9; }\n`).join(''));
        const libs = s.libDirs.map((d) => path.join(sysroot, d));
        const cc = spawnSync(s.cc, [`--sysroot=${sysroot}`, ...libs.map((d) => `-B${d}/`), ...libs.map((d) => `-L${d}`), '-rdynamic', 'probe.c', '-o', 'probe', '-ldl'], { cwd: dir, encoding: 'utf8' });
        assert.equal(cc.status, 0, cc.stderr);
        const r =
          arch === 'x64'
            ? spawnSync(path.join(sysroot, s.loader), ['--library-path', libs.join(':'), './probe', file], { cwd: dir, encoding: 'utf8', env: {} })
            : spawnSync(qemu!, ['-L', sysroot, './probe', file], { cwd: dir, encoding: 'utf8', env: {} });
        assert.equal(r.status, 0, r.stdout + r.stderr);
        assert.deepEqual(JSON.parse(r.stdout), { glibc: '2.17', entry: true });
      } finally {
        fs.rmSync(dir, { recursive: true, force: true });
      }
    });
  });
}
