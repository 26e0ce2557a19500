/**
 * Native unit tests: each C++ file under test/native/ is compiled with the system C++ compiler
 * ($CXX or c++, C++17, threads, no CUDA) and run; a failed check exits non-zero and names itself.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { repoRoot } from '../helpers.js';

const sources = path.join(repoRoot, 'test/native');
const outDir = path.join(repoRoot, 'dist/native-tests');
const compiler = process.env.CXX ?? 'c++';
// Under test:asan every node process has the sanitizer preloaded; the compiler and the test binary
// are not node and are not instrumented, so they run without it.
const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => k !== 'LD_PRELOAD'));

for (const file of fs.readdirSync(sources).filter((f) => f.endsWith('_test.cc')).sort()) {
  test(`native unit test ${file}`, () => {
    fs.mkdirSync(outDir, { recursive: true });
    const binary = path.join(outDir, file.replace(/\.cc$/, ''));
    execFileSync(compiler, ['-std=c++17', '-O1', '-Wall', '-Wextra', '-Werror', '-pthread', '-I', path.join(repoRoot, 'src/native'), '-o', binary, path.join(sources, file)], { stdio: 'pipe', env });
    const run = spawnSync(binary, { encoding: 'utf8', env });
    assert.equal(run.status, 0, `${file} failed:\n${run.stderr}${run.stdout}`);
  });
}
