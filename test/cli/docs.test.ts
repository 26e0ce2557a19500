/**
 * One source for each fact about the command line: docs/cli.md, the README's command section and
 * the remote settings in docs/remote.md are generated and current; the exit status of a failed
 * `--verify` is the same in the code, the help and the docs; remoteWorkers' default is described
 * only by the settings table; the README's demo output is what the demo prints.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { EXIT } from '../../src/cli/common.js';
import { DEMO_DEFAULT_SIZE, EXIT_CHECK_FAILED, findCommand } from '../../src/cli/commands.js';
import { cliMarkdown } from '../../src/cli/help.js';
import { helpPage } from '../../src/cli/kit/command.js';
import { repoRoot } from '../helpers.js';

const read = (file: string) => fs.readFileSync(path.join(repoRoot, file), 'utf8');
const cli = path.join(repoRoot, 'dist/src/cli/main.js');

/** Markdown with the generated sections taken out: what people wrote by hand. */
function handWritten(text: string): string {
  return text.replace(/<!-- ([\w-]+):begin -->[\s\S]*?<!-- \1:end -->/g, '');
}

describe('generated command-line docs', () => {
  it('docs/cli.md, the README command section and the remote settings are current (npm run docs:cli)', () => {
    const r = spawnSync(process.execPath, [path.join(repoRoot, 'scripts/docs-cli.mjs'), '--check'], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    assert.equal(read('docs/cli.md'), cliMarkdown());
    for (const name of ['demo', 'doctor', 'bench', 'info', 'inspect', 'load', 'version']) assert.ok(read('docs/cli.md').includes(helpPage(findCommand(name)!).trimEnd()), name);
  });

  it('a failed --verify exits 3 in the code, the help, the docs and the README', () => {
    assert.equal(EXIT.checkFailed, 3);
    assert.equal(EXIT_CHECK_FAILED, EXIT.checkFailed);
    assert.match(helpPage(findCommand('load')!), /^ {2}3 +--verify: a tensor in memory differs from its file$/m);
    assert.match(read('docs/cli.md'), /--verify: a tensor in memory differs from its file/);
    assert.match(read('README.md'), /^\| 3 \| .*load --verify: a tensor in memory differs from its file/m);
    assert.match(read('docs/tensors.md'), new RegExp(`exits with status ${EXIT_CHECK_FAILED} on any mismatch`));
    for (const file of ['README.md', 'docs/tensors.md', 'docs/cli.md'])
      assert.doesNotMatch(read(file), /(--verify|verify)[^.\n]*(exits?|status) (1|2)\b/, `${file} gives another status for --verify`);
  });

  it("remoteWorkers' default is described by the settings table alone", () => {
    for (const file of ['README.md', ...fs.readdirSync(path.join(repoRoot, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)]) {
      const text = handWritten(read(file));
      assert.doesNotMatch(text, /one (worker )?per \d+ cores|cores \/ \d+, at most/, `${file} describes the default by hand`);
    }
  });

  it("the README's demo output is the demo's, at its default size", () => {
    const readme = read('README.md');
    const block = /<!-- demo-output:begin -->\n```\n([\s\S]*?)\n```\n<!-- demo-output:end -->/.exec(readme);
    assert.ok(block, 'README.md has the demo output between demo-output markers');
    const r = spawnSync(process.execPath, [cli, 'demo'], { encoding: 'utf8', env: { ...process.env, PENSTOCK_CUDA_LIBRARY: '/nonexistent/libcuda.so.1', NO_COLOR: '1' } });
    assert.equal(r.status, 0, r.stderr);
    const shape = (text: string) => text.trim().split('\n').map((l) => l.replace(/\d+(\.\d+)?/g, '#').replace(/\/tmp\/\S+/, 'PATH').replace(/\(no usable GPU here: .*\)$/, '(no usable GPU here: …)'));
    assert.deepEqual(shape(block[1]!), shape(r.stdout));
    const size = /(\d+(?:\.\d+)?) MiB: a/.exec(block[1]!);
    const wanted = Number(/^(\d+)MiB$/.exec(DEMO_DEFAULT_SIZE)![1]);
    assert.ok(size && Number(size[1]) <= wanted && Number(size[1]) > wanted / 2, `README shows ${size?.[1]} MiB, the default is ${DEMO_DEFAULT_SIZE}`);
    assert.match(readme, new RegExp(`${wanted} MiB by\\s+default`));
  });
});
