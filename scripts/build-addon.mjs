#!/usr/bin/env node
// Compiles penstock's native addon from source into build/Release/penstock.node, which the loader
// prefers to the prebuilt binaries. Installed as the `penstock-build` command: the one way to
// compile where no prebuilt binary fits (`npx penstock-build` in an app). Needs python3, make
// and a C++17 compiler; never a CUDA toolkit (CUDA is opened at run time).
//
//   penstock-build                 compile from scratch
//   penstock-build --if-needed     in a git clone: compile only what changed since the last build
//
// Nothing here runs at install time: package managers run no script of penstock's.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const ifNeeded = process.argv.includes('--if-needed');
const unknown = process.argv.slice(2).filter((a) => a !== '--if-needed');
if (unknown.length) {
  console.error(`penstock-build: unknown argument ${unknown[0]} (usage: penstock-build [--if-needed])`);
  process.exit(2);
}

/** npm and pnpm name their own node-gyp to the scripts they run; else npm's, beside this Node.js; else PATH. */
function nodeGyp() {
  const named = process.env.npm_config_node_gyp;
  if (named && fs.existsSync(named)) return [process.execPath, named];
  const bundled = path.join(path.dirname(process.execPath), '../lib/node_modules/npm/node_modules/node-gyp/bin/node-gyp.js');
  if (fs.existsSync(bundled)) return [process.execPath, bundled];
  const onPath = (process.env.PATH ?? '').split(path.delimiter).find((d) => d && fs.existsSync(path.join(d, 'node-gyp')));
  return onPath ? [path.join(onPath, 'node-gyp')] : undefined;
}

function run(cwd, args) {
  const gyp = nodeGyp();
  if (!gyp) {
    console.error('penstock-build: node-gyp not found (it comes with npm; or: npm install -g node-gyp)');
    process.exit(1);
  }
  // All cores: the addon is some forty C++ files.
  const r = spawnSync(gyp[0], [...gyp.slice(1), ...args, '-j', 'max'], { cwd, stdio: 'inherit' });
  if (r.status !== 0) {
    console.error(
      'penstock-build: compiling the addon failed. It needs python3, make and a C++17 compiler (g++ or clang++);\n' +
        '  on Debian/Ubuntu: apt-get install python3 make g++   on RHEL/Rocky: dnf install python3 make gcc-c++',
    );
    process.exit(r.status ?? 1);
  }
}

const out = path.join(root, 'build/Release/penstock.node');
if (fs.existsSync(path.join(root, 'binding.gyp'))) {
  // A git clone: build in place; with --if-needed, make recompiles only what changed.
  const configured = fs.existsSync(path.join(root, 'build/Makefile')) && fs.existsSync(path.join(root, 'build/config.gypi'));
  run(root, ifNeeded && configured ? ['build'] : ['rebuild']);
} else {
  // The installed package ships the build description as dist/binding.gyp (a binding.gyp at the
  // package root would make every package manager want to run a build at install). Build in a
  // scratch folder laid out as the repository, then keep only the binary.
  const gypFile = path.join(root, 'dist/binding.gyp');
  if (!fs.existsSync(gypFile)) {
    console.error(`penstock-build: ${gypFile} is missing: this copy of penstock cannot be compiled`);
    process.exit(1);
  }
  if (ifNeeded && fs.existsSync(out)) process.exit(0);
  const stage = fs.mkdtempSync(path.join(os.tmpdir(), 'penstock-build-'));
  try {
    fs.copyFileSync(gypFile, path.join(stage, 'binding.gyp'));
    fs.mkdirSync(path.join(stage, 'src'));
    fs.symlinkSync(path.join(root, 'src/native'), path.join(stage, 'src/native'));
    const addonApi = path.dirname(createRequire(path.join(root, 'package.json')).resolve('node-addon-api/package.json'));
    fs.mkdirSync(path.join(stage, 'node_modules'));
    fs.symlinkSync(addonApi, path.join(stage, 'node_modules/node-addon-api'));
    run(stage, ['rebuild']);
    fs.mkdirSync(path.dirname(out), { recursive: true });
    fs.copyFileSync(path.join(stage, 'build/Release/penstock.node'), out);
  } finally {
    fs.rmSync(stage, { recursive: true, force: true });
  }
}
console.error(`penstock-build: built ${path.relative(process.cwd(), out) || out}`);
