/**
 * Conventions every `penstock` command keeps: --version, full help pages drawn from the command
 * table, shared options, usage errors with suggestions, exit statuses, width, colour, progress.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { ProgressBar, renderBar } from '../../src/cli/kit/progress.js';
import { colourEnabled } from '../../src/cli/common.js';
import { COMMANDS, SHARED_OPTIONS, findCommand } from '../../src/cli/commands.js';
import { mainHelp } from '../../src/cli/help.js';
import { helpPage } from '../../src/cli/kit/command.js';
import { repoRoot } from '../helpers.js';

const cli = path.join(repoRoot, 'dist/src/cli/main.js');
const run = (args: string[], env: Record<string, string> = {}) =>
  spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', env: { ...process.env, PENSTOCK_CUDA_LIBRARY: '/nonexistent/libcuda.so.1', ...env } });
const version = (JSON.parse(fs.readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as { version: string }).version;

describe('penstock command line', () => {
  it('prints its version for -V, --version, -v and version, with status 0', () => {
    for (const args of [['-V'], ['--version'], ['-v'], ['version'], ['version', '--help']]) {
      const r = run(args);
      assert.equal(r.status, 0, `${args.join(' ')}: ${r.stderr}`);
      if (args.length === 1) assert.equal(r.stdout, `${version}\n`);
    }
    assert.equal(run(['version', 'extra']).status, 2);
  });

  it('has a full help page for every command of the table, under 80 columns, naming every option and exit status', () => {
    for (const spec of COMMANDS) {
      const page = run([spec.name, '--help']);
      assert.equal(page.status, 0, `${spec.name}: ${page.stderr}`);
      assert.equal(page.stdout, helpPage(spec));
      assert.equal(run(['help', spec.name]).stdout, page.stdout, `help ${spec.name}`);
      assert.equal(run([spec.name, '-h']).stdout, page.stdout, `${spec.name} -h`);
      assert.match(page.stdout, new RegExp(`^Usage: penstock ${spec.name}`));
      for (const o of spec.options) assert.match(page.stdout, new RegExp(`--${o.name}\\b`), `${spec.name} --${o.name}`);
      assert.match(page.stdout, /^Exit status:\n  0 +success\n  1 +failure[^]*?\n  2 +usage error/m, spec.name);
      for (const code of Object.keys(spec.exits ?? {})) assert.match(page.stdout, new RegExp(`^  ${code} +\\S`, 'm'), `${spec.name} exit ${code}`);
      const wide = page.stdout.split('\n').filter((l) => l.length >= 80);
      assert.deepEqual(wide, [], `${spec.name}: lines of 80 columns or more`);
    }
    for (const args of [['--help'], ['help'], ['-h'], []]) {
      const r = run(args);
      assert.equal(r.status, 0);
      assert.equal(r.stdout, mainHelp());
      for (const spec of COMMANDS) assert.match(r.stdout, new RegExp(`^  ${spec.name} +\\S`, 'm'));
      for (const code of [0, 1, 2, 3, 130, 143]) assert.match(r.stdout, new RegExp(`^  ${code} +\\S`, 'm'), `exit ${code} listed`);
    }
  });

  it('the same option means the same thing in every command', () => {
    for (const spec of COMMANDS)
      for (const o of spec.options) {
        const shared = Object.values(SHARED_OPTIONS).find((s) => s.name === o.name);
        if (shared) assert.equal(o, shared, `${spec.name} --${o.name} is the shared option`);
      }
    const flags = (name: string) => new Set(findCommand(name)!.options.map((o) => o.name));
    for (const name of ['demo', 'bench', 'load']) for (const f of ['device', 'host']) assert.ok(flags(name).has(f), `${name} --${f}`);
    for (const name of ['bench', 'info', 'inspect', 'load', 'doctor']) assert.ok(flags(name).has('json'), `${name} --json`);
    for (const name of ['bench', 'inspect', 'load']) assert.ok(flags(name).has('anonymous'), `${name} --anonymous`);
    for (const spec of COMMANDS) assert.ok(!flags(spec.name).has('target'), `${spec.name} has no --target`);
  });

  it('exits 2 for a usage error in every command, says where help is, and suggests the near name', () => {
    const cases: [string[], RegExp?][] = [
      [['frobnicate']], [['help', 'frobnicate']], [['demo', '--bogus']], [['demo', '--size', 'lots']], [['demo', 'extra']],
      [['info', '--bogus']], [['bench', '--threads', 'many']], [['bench', '--target', 'host'], /unknown option '--target'/],
      [['load', 'x', '--rows', '3/2'], /--rows must be K\/N/], [['load', 'x', '--rows', '1/0']], [['load', 'x', '--host', '--device', '0'], /exclude each other/],
      [['load', 'x', '--devcie', '1'], /did you mean '--device'/], [['inspect', 'x', '--jsno'], /did you mean '--json'/],
      [['inspect', 'x', '--json=yes'], /takes no value/], [['load', 'x', '--prefix']], [['bnech'], /did you mean 'bench'/],
      [['doctor', '--requir-gds'], /did you mean '--require-gds'/], [['demo', '--device', 'one']],
    ];
    for (const [args, pattern] of cases) {
      const r = run(args);
      assert.equal(r.status, 2, `${args.join(' ')}: ${r.stderr}`);
      assert.match(r.stderr, /--help/, args.join(' '));
      if (pattern) assert.match(r.stderr, pattern, args.join(' '));
      assert.equal(r.stdout, '');
    }
  });

  it('load without a GPU fails with status 1 and the hint to add --host', () => {
    const dir = fs.mkdtempSync(path.join(repoRoot, 'dist', 'load-hint-'));
    try {
      const f = path.join(dir, 'm.safetensors');
      fs.writeFileSync(f, Buffer.concat([Buffer.from([2, 0, 0, 0, 0, 0, 0, 0]), Buffer.from('{}')]));
      const r = run(['load', f]);
      assert.equal(r.status, 1, r.stderr);
      assert.match(r.stderr, /\[ERR_PENSTOCK_NO_CUDA\]/);
      assert.match(r.stderr, /^hint: add --host to load into host memory instead$/m);
      assert.equal(run(['load', f, '--host']).status, 0);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
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
    assert.match(forced.stdout, /\x1b\[32mall \d+ tensors match the file\x1b\[0m/);
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
