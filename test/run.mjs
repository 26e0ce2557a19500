// The suite, whole or in its two groups: `node test/run.mjs fast|slow|all [node --test options]`
// (npm test, npm run test:fast, npm run test:slow). Each runs the compiled files under dist/test/
// that have a source under test/, so the output of a test file since moved or removed never runs.
// Every module counts, helpers too, as `node --test` counts every script of a folder named test.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/**
 * The slow group, by source path under test/: files that start processes (the CLI, npm, a
 * compiler, Python, child scenarios) and took longest, 2.5 s or more each on a 2-core machine,
 * and those that pack and install the package (long where the prebuilt binaries exist, as in CI).
 * The fast group is every other file.
 */
export const SLOW_TESTS = [
  'addon/fake-cufile-open.test.ts',
  'addon/processes.test.ts',
  'cli/conventions.test.ts',
  'cli/demo-info-help.test.ts',
  'cli/doctor.test.ts',
  'cli/health.test.ts',
  'cli/inspect-load.test.ts',
  'cli/output.test.ts',
  'cli/temp-files.test.ts',
  'doctor/probe.test.ts',
  'engine/fake-copy-batch.test.ts',
  'ipc/processes.test.ts',
  'memory/safety-processes.test.ts',
  'native/units.test.ts',
  'package/install.test.ts',
  'package/pack.test.ts',
  'package/prebuilds.test.ts',
  'serve/daemon.test.ts',
  'serve/python.test.ts',
  'serve/socket.test.ts',
];

/** Every TypeScript source under test/ (declarations aside), relative to test/. */
function sources(dir = path.join(repo, 'test'), base = '') {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const rel = base ? `${base}/${e.name}` : e.name;
    if (e.isDirectory()) return e.name === 'node_modules' ? [] : sources(path.join(dir, e.name), rel);
    return e.name.endsWith('.ts') && !e.name.endsWith('.d.ts') ? [rel] : [];
  });
}

/** The compiled files of `group` ('fast', 'slow' or 'all'), relative to the repository. */
export function suiteFiles(group) {
  const all = sources().sort();
  const missing = SLOW_TESTS.filter((f) => !all.includes(f));
  if (missing.length) throw new Error(`test/run.mjs: the slow group names files that do not exist: ${missing.join(', ')}`);
  const slow = new Set(SLOW_TESTS);
  const chosen = group === 'all' ? all : all.filter((f) => slow.has(f) === (group === 'slow'));
  return chosen.map((f) => `dist/test/${f.replace(/\.ts$/, '.js')}`);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [group, ...options] = process.argv.slice(2);
  if (!['fast', 'slow', 'all'].includes(group)) {
    console.error('usage: node test/run.mjs fast|slow|all [node --test options]');
    process.exit(2);
  }
  const files = suiteFiles(group);
  const absent = files.filter((f) => !fs.existsSync(path.join(repo, f)));
  if (absent.length) {
    console.error(`test/run.mjs: not compiled (npm run build:ts): ${absent.join(', ')}`);
    process.exit(1);
  }
  const r = spawnSync(process.execPath, ['--test', '--test-concurrency=1', ...options, ...files], { cwd: repo, stdio: 'inherit' });
  process.exit(r.status ?? 1);
}
