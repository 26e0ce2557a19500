/**
 * What the CLI writes: every command ends quietly (status 0, nothing on stderr) when the reader of
 * its output goes away, and nothing from a file, a server or a variable can act on the terminal
 * (control characters escaped in text, C1 controls escaped in JSON too).
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { hasControlCharacters, terminalJson, terminalText } from '../../src/vocabulary/terminal-text.js';
import { repoRoot, tmpDir } from '../helpers.js';
import { writeSafetensors } from '../tensor-writer.js';
import { RangeServer } from '../remote-range-server.js';

const cli = path.join(repoRoot, 'dist/src/cli/main.js');
const noGpu = { PENSTOCK_CUDA_LIBRARY: '/nonexistent/libcuda.so.1' };
const run = (args: string[], env: Record<string, string> = {}) => spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', env: { ...process.env, ...noGpu, ...env } });
let n = 0;

/** Runs the CLI with its stdout's reading end closed at once: every write it makes meets EPIPE. */
function withClosedReader(args: string[], env: Record<string, string> = {}): Promise<{ status: number | null; signal: string | null; stderr: string }> {
  const child = spawn(process.execPath, [cli, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...noGpu, ...env } });
  child.stdout.destroy();
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  return new Promise((resolve) => child.on('close', (status, signal) => resolve({ status, signal, stderr })));
}

/** Control characters a terminal obeys: C0 but LF, DEL, C1. */
const RAW_CONTROL = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/;

describe('a reader that goes away', () => {
  it('ends every command quietly with status 0', async () => {
    const many = path.join(tmpDir(), `many-${++n}.safetensors`);
    writeSafetensors(many, Array.from({ length: 3000 }, (_, i) => ({ name: `model.layers.${i}.mlp.down_proj.weight`, dtype: 'F32' as const, shape: [1] })));
    const temp = fs.mkdtempSync(path.join(tmpDir(), 'epipe-tmp-'));
    const cases = [['info'], ['info', '--json'], ['--help'], ['help', 'load'], ['version'], ['inspect', many], ['inspect', many, '--json'], ['load', many, '--host'], ['demo', '--size', '1MiB']];
    for (const args of cases) {
      const r = await withClosedReader(args, { TMPDIR: temp });
      assert.deepEqual([r.status, r.signal, r.stderr], [0, null, ''], args.join(' '));
    }
    assert.deepEqual(fs.readdirSync(temp), [], 'the demo removed its checkpoint');
  });

  it('in a shell pipeline into head', { skip: fs.existsSync('/bin/bash') ? false : 'no bash' }, () => {
    const many = path.join(tmpDir(), `many-${++n}.safetensors`);
    writeSafetensors(many, Array.from({ length: 20000 }, (_, i) => ({ name: `t${i}`, dtype: 'U8' as const, shape: [1] })));
    const r = spawnSync('/bin/bash', ['-c', `"${process.execPath}" "${cli}" inspect "${many}" | head -n 2; echo "status \${PIPESTATUS[0]}" >&2`], { encoding: 'utf8', env: { ...process.env, ...noGpu } });
    assert.equal(r.stdout.split('\n').length, 3);
    assert.equal(r.stderr, 'status 0\n');
  });
});

describe('terminal-safe text', () => {
  it('escapes C0, DEL, C1, line separators and bidirectional controls, and nothing else', () => {
    assert.equal(terminalText('a\x1b]0;title\x07b\r\nc\x9b2J\x7f\u202e'), 'a\\x1b]0;title\\x07b\\r\\nc\\x9b2J\\x7f\\u202e');
    assert.equal(terminalText('line 1\nline 2\r', { keepLines: true }), 'line 1\nline 2\\r');
    assert.equal(terminalText('model.layers.0 µ × — 中文 \\x1b'), 'model.layers.0 µ × — 中文 \\x1b');
    assert.equal(hasControlCharacters('plain'), false);
    assert.equal(hasControlCharacters('a\x85b'), true);
    for (let c = 0; c < 0x3000; c++) assert.doesNotMatch(terminalText(String.fromCharCode(c)), RAW_CONTROL, `U+${c.toString(16)}`);
  });

  it('JSON keeps its value and escapes C1 controls too', () => {
    const value = { name: 'a\x1b[2J\x9b31m\x85\u2028\x07', n: [1, 2] };
    const text = terminalJson(value);
    assert.doesNotMatch(text, RAW_CONTROL);
    assert.doesNotMatch(text, /\u2028/);
    assert.deepEqual(JSON.parse(text), value);
  });
});

describe('names from files on the terminal', () => {
  const hostile = ['title\x1b]0;pwned\x07', 'fake\r\nline', 'csi\x9b2J', 'clear\x1b[2J\x1b[H', 'next\u0085line'];

  it('inspect and load escape tensor names in text and keep them exact in JSON', () => {
    const f = path.join(tmpDir(), `hostile-${++n}.safetensors`);
    writeSafetensors(f, hostile.map((name) => ({ name, dtype: 'U8' as const, shape: [4] })));
    const text = run(['inspect', f]);
    assert.equal(text.status, 0, text.stderr);
    assert.doesNotMatch(text.stdout, RAW_CONTROL);
    assert.match(text.stdout, /^title\\x1b\]0;pwned\\x07 /m);
    assert.match(text.stdout, /^fake\\r\\nline /m);
    assert.match(text.stdout, /^csi\\x9b2J /m);
    const json = run(['inspect', f, '--json']);
    assert.doesNotMatch(json.stdout, RAW_CONTROL);
    assert.deepEqual((JSON.parse(json.stdout) as { tensors: { name: string }[] }).tensors.map((t) => t.name).sort(), [...hostile].sort());
    const loaded = run(['load', f, '--host', '--json']);
    assert.equal(loaded.status, 0, loaded.stderr);
    assert.doesNotMatch(loaded.stdout, RAW_CONTROL);
    assert.deepEqual((JSON.parse(loaded.stdout) as { tensors: { name: string }[] }).tensors.map((t) => t.name).sort(), [...hostile].sort());
  });

  it('error messages on stderr carry shard names escaped', () => {
    const dir = fs.mkdtempSync(path.join(tmpDir(), 'hostile-index-'));
    const index = path.join(dir, 'model.safetensors.index.json');
    fs.writeFileSync(index, JSON.stringify({ weight_map: { w: 'shard\x1b]0;pwned\x07\x9b2J\r.safetensors' } }));
    for (const args of [['inspect', index], ['load', index, '--host']]) {
      const r = run(args);
      assert.equal(r.status, 1, args.join(' '));
      assert.match(r.stderr, /^penstock: \[[A-Z_]+\] /m);
      // Escaped by the terminal text (\x1b) or, inside a quoted name, as JSON (\u001b): never raw.
      assert.match(r.stderr, /shard\\(x1b|u001b)\]0;pwned\\(x07|u0007)\\(x9b|u009b)2J\\r\.safetensors/, r.stderr);
      assert.doesNotMatch(r.stderr, RAW_CONTROL);
    }
  });

  it('option and command names from the command line are escaped in usage errors', () => {
    for (const args of [['lo\x1b[2Jad'], ['load', '--de\x07vice'], ['inspect', '--json=\x9b']]) {
      const r = run(args);
      assert.equal(r.status, 2);
      assert.doesNotMatch(r.stderr, RAW_CONTROL, JSON.stringify(args));
    }
  });
});

describe('progress', () => {
  it('a slow remote load draws a bar on a terminal (stderr), none into a pipe', { skip: fs.existsSync('/usr/bin/script') ? false : 'no script(1) to make a terminal' }, async () => {
    const server = await new RangeServer().start();
    try {
      const f = path.join(tmpDir(), `progress-${++n}.safetensors`);
      writeSafetensors(f, [{ name: 'w', dtype: 'U8', shape: [1 << 20] }]);
      server.put('/ckpt/model.safetensors', fs.readFileSync(f));
      const slow = { PENSTOCK_REMOTE_RANGE_SIZE: '64KiB', PENSTOCK_REMOTE_CONCURRENCY: '1', TERM: 'xterm' };
      const collect = (file: string, args: string[], env: Record<string, string>) =>
        new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve) => {
          const child = spawn(file, args, { env: { ...process.env, ...noGpu, ...env } });
          let stdout = '';
          let stderr = '';
          child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
          child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
          child.on('close', (status) => resolve({ status, stdout, stderr }));
        });
      server.inject({ kind: 'slow', ms: 60 }, { times: Infinity, method: 'GET' });
      const onTty = await collect('/usr/bin/script', ['-qec', `"${process.execPath}" "${cli}" load "${server.url('/ckpt/model.safetensors')}" --host >/dev/null`, '/dev/null'], slow);
      assert.equal(onTty.status, 0, onTty.stdout);
      assert.match(onTty.stdout, /loading into host memory \[#*\.*\] +\d+%/);
      server.inject({ kind: 'slow', ms: 60 }, { times: Infinity, method: 'GET' });
      const piped = await collect(process.execPath, [cli, 'load', server.url('/ckpt/model.safetensors'), '--host'], slow);
      assert.equal(piped.status, 0, piped.stderr);
      assert.doesNotMatch(piped.stderr, /loading into|\r/);
      assert.match(piped.stdout, /^Loaded 1 tensors, 1048576 bytes/m);
    } finally {
      await server.stop();
    }
  });
});
