#!/usr/bin/env node
// Builds the addon for every platform the package ships a binary for, into prebuilds/<platform>-<arch>/
// (the layout node-gyp-build looks in). linux-x64 is built natively, linux-arm64 with Debian's
// aarch64 cross compiler. Run through npm (`npm run build:prebuilds`), which puts its own node-gyp
// on PATH and passes its configuration (nodedir, …) on to it.
//
//   node scripts/build-prebuilds.mjs [x64] [arm64]    (default: both)
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** Each target: its compilers and strip (host tools for the native one). */
const TARGETS = {
  x64: { CC: 'gcc', CXX: 'g++', STRIP: 'strip' },
  arm64: { CC: 'aarch64-linux-gnu-gcc', CXX: 'aarch64-linux-gnu-g++', STRIP: 'aarch64-linux-gnu-strip' },
};

function onPath(tool) {
  return (process.env.PATH ?? '').split(path.delimiter).some((dir) => dir && fs.existsSync(path.join(dir, tool)));
}

function findNodeGyp() {
  if (process.env.npm_config_node_gyp && fs.existsSync(process.env.npm_config_node_gyp)) return process.env.npm_config_node_gyp;
  const bundled = path.join(path.dirname(process.execPath), '../lib/node_modules/npm/node_modules/node-gyp/bin/node-gyp.js');
  return fs.existsSync(bundled) ? bundled : undefined;
}

const wanted = process.argv.slice(2).length ? process.argv.slice(2) : Object.keys(TARGETS);
const nodeGyp = findNodeGyp();
if (!nodeGyp) {
  console.error('build-prebuilds: node-gyp not found (run this through npm: npm run build:prebuilds)');
  process.exit(1);
}
// prebuildify spawns PREBUILD_NODE_GYP directly: a small wrapper runs npm's node-gyp with this Node.
const shim = fs.mkdtempSync(path.join(os.tmpdir(), 'penstock-prebuild-'));
const wrapper = path.join(shim, 'node-gyp');
fs.writeFileSync(wrapper, `#!/bin/sh\nexec "${process.execPath}" "${nodeGyp}" "$@"\n`, { mode: 0o755 });
// node-gyp rebuilds in place: a copy of the sources keeps the checkout's own build/ untouched.
const stage = path.join(shim, 'src');
for (const p of ['package.json', 'binding.gyp', 'src/native', 'node_modules/node-addon-api'])
  fs.cpSync(path.join(root, p), path.join(stage, p), { recursive: true });

let failed = 0;
try {
  for (const arch of wanted) {
    const tools = TARGETS[arch];
    if (!tools) {
      console.error(`build-prebuilds: unknown target '${arch}' (known: ${Object.keys(TARGETS).join(', ')})`);
      failed++;
      continue;
    }
    const missing = [tools.CXX, tools.STRIP].filter((t) => !onPath(t));
    if (missing.length) {
      console.error(`build-prebuilds: ${arch}: ${missing.join(', ')} not on PATH` + (arch === 'arm64' ? ' (apt-get install g++-aarch64-linux-gnu)' : ''));
      failed++;
      continue;
    }
    const t0 = Date.now();
    const r = spawnSync(
      process.execPath,
      // Node-API (NAPI_VERSION in binding.gyp) keeps one binary good for every Node.js from 20 on;
      // the headers are this Node's, so nothing is downloaded.
      [
        path.join(root, 'node_modules/prebuildify/bin.js'), '--napi', '--strip', '--tag-libc', `--arch=${arch}`,
        `--target=${process.versions.node}`, `--out=${root}`, stage,
      ],
      {
        cwd: stage,
        stdio: 'inherit',
        env: {
          ...process.env,
          CC: tools.CC, CXX: tools.CXX, LINK: tools.CXX,
          // Binds to older symbol versions where the newer ones name the same function (see the header).
          CXXFLAGS: [process.env.CXXFLAGS, `-include ${path.join(root, 'scripts/prebuild-compat.h')}`].filter(Boolean).join(' '),
          PREBUILD_STRIP_BIN: tools.STRIP,
          PREBUILD_NODE_GYP: wrapper,
        },
      },
    );
    if (r.status !== 0) failed++;
    console.error(`build-prebuilds: ${arch}: ${r.status === 0 ? 'built' : 'FAILED'} in ${((Date.now() - t0) / 1000).toFixed(0)} s`);
  }
} finally {
  fs.rmSync(shim, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
