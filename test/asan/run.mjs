// The whole test suite with the addon and the fake driver built with AddressSanitizer and
// UndefinedBehaviorSanitizer (npm run test:asan; see docs/testing.md). Node itself is not
// instrumented: libasan is preloaded into every node process the suite starts, and reports go
// to one log file per process under build-asan/reports/, summarised at the end.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const out = path.join(repo, 'build-asan');
const root = path.join(out, 'root');
const reports = path.join(out, 'reports');

function run(cmd, args, options = {}) {
  const r = spawnSync(cmd, args, { stdio: 'inherit', ...options });
  if (r.status !== 0) {
    console.error(`test:asan: ${cmd} ${args.join(' ')} failed (${r.status ?? r.signal})`);
    process.exit(1);
  }
}

function lib(name) {
  const r = spawnSync(process.env.CC || 'gcc', [`-print-file-name=${name}`], { encoding: 'utf8' });
  const file = r.stdout.trim();
  if (!path.isAbsolute(file) || !fs.existsSync(file)) {
    console.error(`test:asan: ${name} not found (a gcc with AddressSanitizer is needed)`);
    process.exit(1);
  }
  return file;
}

// A copy of the package: the suite finds the addon, the fake driver and its fixtures relative
// to its own files, so the sanitized build never replaces the normal one.
run('npm', ['run', 'build:ts'], { cwd: repo });
fs.rmSync(root, { recursive: true, force: true });
fs.rmSync(reports, { recursive: true, force: true });
fs.mkdirSync(reports, { recursive: true });
// Everything the suite reads: the sources and their build, the docs it checks, the scripts it
// runs (docs generators, the addon builder), the Python client and the benchmarks' code.
for (const entry of ['package.json', 'package-lock.json', 'binding.gyp', 'src', 'dist', 'test', 'docs', 'scripts', 'python', 'bench', 'README.md', 'CHANGELOG.md', 'LICENSE'].filter((e) => fs.existsSync(path.join(repo, e))))
  fs.cpSync(path.join(repo, entry), path.join(root, entry), { recursive: true, verbatimSymlinks: true });
fs.rmSync(path.join(root, 'dist/fake-driver'), { recursive: true, force: true });
fs.symlinkSync(path.join(repo, 'node_modules'), path.join(root, 'node_modules'));

const sanitize = '-fsanitize=address,undefined,float-cast-overflow -fno-sanitize-recover=undefined,float-cast-overflow -fno-omit-frame-pointer';
// npm names its own node-gyp to the scripts it runs; otherwise one on PATH.
const gyp = process.env.npm_config_node_gyp;
const gypArgs = ['rebuild', '--penstock_sanitize=1', '-j', '2'];
if (gyp) run(process.execPath, [gyp, ...gypArgs], { cwd: root });
else run('node-gyp', gypArgs, { cwd: root });
run(process.execPath, ['test/fake-driver/build.mjs'], { cwd: root, env: { ...process.env, FAKE_DRIVER_CFLAGS: sanitize } });

const env = {
  ...process.env,
  LD_PRELOAD: [lib('libasan.so'), lib('libubsan.so')].join(' '),
  // allocator_may_return_null: a test asks for 1 TiB of bounce buffers and expects a typed
  // out-of-memory error, not an abort.
  ASAN_OPTIONS: `log_path=${reports}/asan:allocator_may_return_null=1:detect_leaks=1:halt_on_error=1`,
  LSAN_OPTIONS: `suppressions=${path.join(repo, 'test/asan/lsan.supp')}:print_suppressions=0`,
  UBSAN_OPTIONS: `log_path=${reports}/ubsan:print_stacktrace=1:halt_on_error=1`,
};
const t0 = Date.now();
const suite = spawnSync(process.execPath, ['test/run.mjs', 'all'], { cwd: root, env, stdio: 'inherit' });
const seconds = ((Date.now() - t0) / 1000).toFixed(0);

// A log holding only warnings (the refused 1 TiB allocation above) is no report.
const kinds = { asan: [], ubsan: [], lsan: [], warnings: [] };
for (const f of fs.readdirSync(reports).map((name) => path.join(reports, name))) {
  const text = fs.readFileSync(f, 'utf8');
  if (/ERROR: LeakSanitizer/.test(text)) kinds.lsan.push(f);
  else if (/ERROR: AddressSanitizer/.test(text)) kinds.asan.push(f);
  else if (/runtime error:/.test(text)) kinds.ubsan.push(f);
  else kinds.warnings.push(f);
}
const errors = [...kinds.asan, ...kinds.ubsan, ...kinds.lsan];
console.log(
  `\ntest:asan: suite exit ${suite.status ?? suite.signal} after ${seconds} s; reports: ${kinds.asan.length} AddressSanitizer, ` +
    `${kinds.ubsan.length} UBSan, ${kinds.lsan.length} LeakSanitizer; ${kinds.warnings.length} log(s) of warnings only (logs in ${reports})`,
);
for (const f of errors) console.log(`  ${f}`);
process.exit(suite.status === 0 && errors.length === 0 ? 0 : 1);
