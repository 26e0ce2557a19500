/** Conventions every `penstock` command keeps: --version, --help, exit statuses, width, colour, progress. */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { ProgressBar, renderBar } from '../src/cli/kit/progress.js';
import { colourEnabled } from '../src/cli/common.js';
import { repoRoot } from './helpers.js';

const cli = path.join(repoRoot, 'dist/src/cli/main.js');
const run = (args: string[], env: Record<string, string> = {}) =>
  spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', env: { ...process.env, PENSTOCK_CUDA_LIBRARY: '/nonexistent/libcuda.so.1', ...env } });
const version = (JSON.parse(fs.readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as { version: string }).version;
const COMMANDS = ['demo', 'bench', 'info'];

describe('penstock command line', () => {
  it('prints its version for --version and -v', () => {
    for (const flag of ['--version', '-v']) {
      const r = run([flag]);
      assert.equal(r.status, 0);
      assert.equal(r.stdout, `${version}\n`);
    }
  });

  it('has --help on every command, under 80 columns, naming the exit statuses', () => {
    for (const args of [['--help'], ['help'], ...COMMANDS.map((c) => [c, '--help']), ...COMMANDS.map((c) => ['help', c]), ...COMMANDS.map((c) => [c, '-h'])]) {
      const r = run(args);
      assert.equal(r.status, 0, `${args.join(' ')}: ${r.stderr}`);
      assert.match(r.stdout, /Exit status: 0 success, 1 failure, 2 usage error/, args.join(' '));
      const wide = r.stdout.split('\n').filter((l) => l.length >= 80);
      assert.deepEqual(wide, [], `${args.join(' ')}: lines of 80 columns or more`);
    }
  });

  it('exits 2 for a usage error in every command, and says where help is', () => {
    for (const args of [['frobnicate'], ['help', 'frobnicate'], ['demo', '--bogus'], ['demo', '--size', 'lots'], ['demo', 'extra'], ['info', '--bogus'], ['bench', '--threads', 'many']]) {
      const r = run(args);
      assert.equal(r.status, 2, `${args.join(' ')}: ${r.stderr}`);
      assert.match(r.stderr, /--help/, args.join(' '));
      assert.equal(r.stdout, '');
    }
    assert.match(run(['bnech']).stderr, /did you mean 'bench'/);
  });

  it('info reports unusable variables by name and value, and exits 1', () => {
    const r = run(['info'], { PENSTOCK_THREADS: 'abc', PENSTOCK_DIRECT_IO: '1', PENSTOCK_DIRECT_IO_READ: '0' });
    assert.equal(r.status, 1, r.stderr);
    assert.match(r.stdout, /\[ERR_PENSTOCK_INVALID_SETTING\] PENSTOCK_THREADS='abc' is not valid/);
    assert.match(r.stdout, /\[ERR_PENSTOCK_CONFLICTING_SETTINGS\] PENSTOCK_DIRECT_IO='1' and PENSTOCK_DIRECT_IO_READ='0'/);
    assert.match(r.stdout, /^ {2}taskSize +4 MiB$/m);
    const json = JSON.parse(run(['info', '--json'], { PENSTOCK_THREADS: 'abc' }).stdout) as { problems: { variable: string; value: string }[] };
    assert.deepEqual(json.problems.map((p) => [p.variable, p.value]), [['PENSTOCK_THREADS', 'abc']]);
  });

  it('runs what needs no settings despite an unusable variable, and names it where settings are needed', () => {
    const env = { PENSTOCK_THREADS: 'abc' };
    for (const args of [['--version'], ['--help'], ['demo', '--help'], ['bench', '--help'], ['info', '--help']]) assert.equal(run(args, env).status, 0, args.join(' '));
    const demo = run(['demo', '--size', '1MiB'], env);
    assert.equal(demo.status, 1);
    assert.match(demo.stderr, /\[ERR_PENSTOCK_INVALID_SETTING\] PENSTOCK_THREADS='abc' is not valid/);
  });

  it('info shows where each setting came from', () => {
    const r = run(['info'], { PENSTOCK_TASK_SIZE: '1MiB', PENSTOCK_THRADS: '3' });
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /^ {2}taskSize +1 MiB {2}\(PENSTOCK_TASK_SIZE\)$/m);
    assert.match(r.stdout, /PENSTOCK_THRADS is not a penstock variable \(did you mean PENSTOCK_THREADS\?\)/);
  });

  it('demo --host prints its target once', () => {
    const r = run(['demo', '--host', '--size', '1MiB']);
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout.match(/^Target:/gm)?.length, 1, r.stdout);
    assert.match(r.stdout, /^Target: host memory \(--host\)$/m);
  });

  it('demo reads and verifies a file larger than 2 GiB', () => {
    const dir = fs.mkdtempSync(path.join(repoRoot, 'dist', 'big-'));
    try {
      const file = path.join(dir, 'sparse.bin');
      const size = 2 ** 31 + 8192;
      fs.writeFileSync(file, 'head');
      fs.truncateSync(file, size); // sparse: no disk used
      const r = run(['demo', '--host', '--file', file]);
      assert.equal(r.status, 0, r.stderr);
      assert.match(r.stdout, /^Verified: yes/m);
      assert.match(r.stdout, new RegExp(`^Bytes: ${size} `, 'm'));
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('colour', () => {
  it('follows FORCE_COLOR, then NO_COLOR, then the terminal', () => {
    const tty = { isTTY: true };
    const pipe = { isTTY: false };
    assert.equal(colourEnabled(tty, {}), true);
    assert.equal(colourEnabled(pipe, {}), false);
    assert.equal(colourEnabled(tty, { NO_COLOR: '1' }), false);
    assert.equal(colourEnabled(tty, { NO_COLOR: '' }), true);
    assert.equal(colourEnabled(pipe, { FORCE_COLOR: '1' }), true);
    assert.equal(colourEnabled(pipe, { FORCE_COLOR: '' }), true);
    assert.equal(colourEnabled(tty, { FORCE_COLOR: '0' }), false);
    assert.equal(colourEnabled(pipe, { FORCE_COLOR: '1', NO_COLOR: '1' }), true);
    assert.equal(colourEnabled(tty, { TERM: 'dumb' }), false);
  });

  it('is written by the CLI only when asked for off a terminal', () => {
    const plain = run(['demo', '--host', '--size', '1MiB']);
    assert.doesNotMatch(plain.stdout, /\x1b\[/);
    const forced = run(['demo', '--host', '--size', '1MiB'], { FORCE_COLOR: '1' });
    assert.match(forced.stdout, /\x1b\[32myes, sha256 matches the file\x1b\[0m/);
    const denied = run(['demo', '--host', '--size', '1MiB'], { FORCE_COLOR: '0', NO_COLOR: '1' });
    assert.doesNotMatch(denied.stdout, /\x1b\[/);
  });
});

describe('progress bars', () => {
  it('fit every width, including 0 columns (unknown)', () => {
    for (let columns = 0; columns <= 200; columns++) {
      const text = renderBar('[3/4] threads 16, task 4 MiB run 2/6', 2 ** 29, 2 ** 30, 0.4, columns);
      const room = (columns > 0 ? columns : 80) - 1;
      assert.ok(text.length <= room, `${columns} columns: ${text.length} characters`);
      if (room >= 4) assert.match(text, /50%/, `${columns} columns: '${text}'`);
    }
    assert.match(renderBar('reading', 1, 2, 1, 0), /^reading \[#+\.+\] +50% /);
  });

  it('never draw on a stream that is not a terminal', () => {
    const writes: string[] = [];
    const stream = { isTTY: false, columns: 80, write: (s: string) => writes.push(s) > 0 };
    const bar = new ProgressBar({ label: 'x', total: 10, stream, delayMs: 0, enabled: true });
    bar.update(5);
    bar.finish();
    assert.equal(writes.length, 0);
    const tty = { isTTY: true, columns: 0, write: (s: string) => writes.push(s) > 0 };
    const shown = new ProgressBar({ label: 'x', total: 10, stream: tty, delayMs: 0 });
    shown.update(5);
    shown.finish();
    assert.equal(writes.length, 2);
    assert.match(writes[0]!, /x \[#+\.+\] +50%/);
  });
});
