/**
 * Health checks say the real cause: an unusable PENSTOCK_* variable is named with its value (not
 * blamed on the CUDA driver) and fails the doctor; a native addon that cannot be loaded is an
 * error of its own (hasGpu() throws it, `penstock info` fails), never "no GPU". And the doctor's
 * colours follow FORCE_COLOR, NO_COLOR and TERM=dumb.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { repoRoot, tmpDir } from '../helpers.js';

const cli = path.join(repoRoot, 'dist/src/cli/main.js');
const ESC = /\x1b\[/;

function env(extra: Record<string, string>): NodeJS.ProcessEnv {
  const e = { ...process.env };
  for (const k of Object.keys(e)) if (/^(PENSTOCK_|FAKE_|CUFILE_)/.test(k) || ['NO_COLOR', 'FORCE_COLOR', 'TERM'].includes(k)) delete e[k];
  return { ...e, PENSTOCK_CUDA_LIBRARY: '/nonexistent/libcuda.so.1', ...extra };
}

const run = (args: string[], extra: Record<string, string> = {}, cwd = repoRoot) => spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', env: env(extra), cwd });

/**
 * A copy of the compiled package without any native addon: what an install whose binary did not
 * load looks like. Its dependencies are the repository's.
 */
function packageWithoutAddon(): string {
  const root = fs.mkdtempSync(path.join(tmpDir(), 'no-addon-'));
  fs.cpSync(path.join(repoRoot, 'dist/src'), path.join(root, 'dist/src'), { recursive: true });
  fs.copyFileSync(path.join(repoRoot, 'package.json'), path.join(root, 'package.json'));
  fs.symlinkSync(path.join(repoRoot, 'node_modules'), path.join(root, 'node_modules'));
  return root;
}

describe('health checks say the real cause', () => {
  it('doctor names an unusable PENSTOCK_* variable and its value, and exits 1', () => {
    for (const [name, value] of [['PENSTOCK_THREADS', 'many'], ['PENSTOCK_TASK_SIZE', '3 parsecs']] as const) {
      const r = run(['doctor', '.'], { [name]: value });
      assert.equal(r.status, 1, r.stdout + r.stderr);
      assert.match(r.stderr, new RegExp(`\\[ERR_PENSTOCK_INVALID_SETTING\\] ${name}='${value}' is not valid`));
      assert.match(r.stderr, new RegExp(`fix or unset ${name}`));
      assert.doesNotMatch(r.stdout + r.stderr, /npm rebuild|CUDA driver/);
    }
  });

  it('without the addon, hasGpu() throws ERR_PENSTOCK_ADDON_LOAD and info exits 1 saying so', () => {
    const root = packageWithoutAddon();
    const probe = spawnSync(
      process.execPath,
      ['--input-type=module', '-e', `import { hasGpu } from ${JSON.stringify(path.join(root, 'dist/src/index.js'))};
        try { console.log('returned', hasGpu()); } catch (e) { console.log('threw', e.code); }`],
      { encoding: 'utf8', env: env({}) },
    );
    assert.equal(probe.stdout.trim(), 'threw ERR_PENSTOCK_ADDON_LOAD', probe.stderr);
    const main = path.join(root, 'dist/src/cli/main.js');
    const info = spawnSync(process.execPath, [main, 'info'], { encoding: 'utf8', env: env({}) });
    assert.equal(info.status, 1, info.stdout + info.stderr);
    assert.match(info.stdout, /problem: the native addon is not loaded, so no GPU can be used: \[ERR_PENSTOCK_ADDON_LOAD\]/);
    const json = spawnSync(process.execPath, [main, 'info', '--json'], { encoding: 'utf8', env: env({}) });
    assert.equal(json.status, 1);
    assert.equal((JSON.parse(json.stdout) as { addonError: { code: string } }).addonError.code, 'ERR_PENSTOCK_ADDON_LOAD');
    const load = spawnSync(process.execPath, [main, 'demo', '--size', '1MiB'], { encoding: 'utf8', env: env({ TMPDIR: root }) });
    assert.equal(load.status, 1);
    assert.match(load.stderr, /ERR_PENSTOCK_ADDON_LOAD/);
  });
});

describe('doctor colours', () => {
  const gdscheck = path.join(repoRoot, 'test/fixtures/doctor/gdscheck/gds-1.7-nvme-unregistered.txt');

  it('off a terminal: only with FORCE_COLOR', () => {
    assert.doesNotMatch(run(['doctor', '--gdscheck', gdscheck]).stdout, ESC);
    assert.match(run(['doctor', '--gdscheck', gdscheck], { FORCE_COLOR: '1' }).stdout, ESC);
    assert.match(run(['doctor', '.'], { FORCE_COLOR: '1' }).stdout, ESC);
    assert.doesNotMatch(run(['doctor', '--gdscheck', gdscheck], { FORCE_COLOR: '0' }).stdout, ESC);
  });

  it('on a terminal: unless NO_COLOR or TERM=dumb', { skip: fs.existsSync('/usr/bin/script') ? false : 'no script(1) to make a terminal' }, () => {
    const onTty = (extra: Record<string, string>) =>
      spawnSync('/usr/bin/script', ['-qec', `"${process.execPath}" "${cli}" doctor --gdscheck "${gdscheck}"`, '/dev/null'], { encoding: 'utf8', env: env({ TERM: 'xterm', ...extra }) }).stdout;
    assert.match(onTty({}), ESC);
    assert.doesNotMatch(onTty({ TERM: 'dumb' }), ESC);
    assert.doesNotMatch(onTty({ NO_COLOR: '1' }), ESC);
    assert.match(onTty({ TERM: 'dumb', FORCE_COLOR: '1' }), ESC);
  });
});
