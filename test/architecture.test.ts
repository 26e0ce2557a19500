/**
 * The tree is the architecture: TypeScript rooms (the folders under src/) stacked in floors, each
 * importing only its own floor or those below, with no cycles; native code in three rooms, of
 * which only js/ may include Node-API; and tests in folders named after the rooms they test.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { repoRoot } from './helpers.js';

/** The floors, bottom first. A file directly under src/ is on the top floor (the face). */
const FLOORS = ['vocabulary', 'settings', 'system', 'plan', 'addon', 'memory', 'engine', 'sources', 'formats', 'tensors', 'ipc', 'serve', 'doctor', 'cli', '(face)'];

function filesUnder(dir: string, ext: RegExp): string[] {
  const out: string[] = [];
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) out.push(...filesUnder(p, ext));
    else if (ext.test(e.name)) out.push(p);
  }
  return out;
}

const src = path.join(repoRoot, 'src');
const roomOf = (file: string): string => {
  const parts = path.relative(src, file).split(path.sep);
  return parts.length > 1 ? parts[0]! : '(face)';
};

function importsOf(file: string): string[] {
  const text = fs.readFileSync(file, 'utf8');
  return [...text.matchAll(/(?:\bfrom|\bimport\()\s*'(\.[^']+)\.js'/g)].map((m) => path.normalize(path.join(path.dirname(file), `${m[1]}.ts`)));
}

const tsFiles = filesUnder(src, /\.ts$/).filter((f) => !f.startsWith(path.join(src, 'native')));

test('every TypeScript room is on a floor, and no import runs back up', () => {
  const upward: string[] = [];
  for (const f of tsFiles) {
    const from = FLOORS.indexOf(roomOf(f));
    assert.ok(from >= 0, `${path.relative(repoRoot, f)} is in a room that has no floor: add it to FLOORS`);
    for (const t of importsOf(f)) {
      assert.ok(fs.existsSync(t), `${path.relative(repoRoot, f)} imports ${path.relative(repoRoot, t)}, which does not exist`);
      if (FLOORS.indexOf(roomOf(t)) > from) upward.push(`${path.relative(src, f)} -> ${path.relative(src, t)}`);
    }
  }
  assert.deepEqual(upward, []);
});

test('no import cycles between TypeScript files', () => {
  const edges = new Map(tsFiles.map((f) => [f, importsOf(f)]));
  const state = new Map<string, 'open' | 'done'>();
  const cycles: string[] = [];
  const visit = (f: string, trail: string[]): void => {
    if (state.get(f) === 'done') return;
    if (state.get(f) === 'open') {
      cycles.push([...trail.slice(trail.indexOf(f)), f].map((x) => path.relative(src, x)).join(' -> '));
      return;
    }
    state.set(f, 'open');
    for (const t of edges.get(f) ?? []) visit(t, [...trail, f]);
    state.set(f, 'done');
  };
  for (const f of tsFiles) visit(f, []);
  assert.deepEqual(cycles, []);
});

test('native engine and sys code never include Node-API; every native file is in one of the three rooms', () => {
  const native = path.join(src, 'native');
  const offenders: string[] = [];
  for (const f of filesUnder(native, /\.(h|cc)$/)) {
    const room = path.relative(native, f).split(path.sep)[0];
    assert.ok(['sys', 'engine', 'js'].includes(room!), `${path.relative(repoRoot, f)} is outside native/{sys,engine,js}`);
    if (room === 'js') continue;
    const text = fs.readFileSync(f, 'utf8');
    if (/#include\s*[<"]napi\.h[>"]/.test(text) || /#include\s*"js\//.test(text) || /\bNapi::/.test(text)) offenders.push(path.relative(repoRoot, f));
  }
  assert.deepEqual(offenders, []);
});

test('sys code includes nothing of the engine', () => {
  const sys = path.join(src, 'native', 'sys');
  const offenders = filesUnder(sys, /\.(h|cc)$/).filter((f) => /#include\s*"engine\//.test(fs.readFileSync(f, 'utf8')));
  assert.deepEqual(offenders.map((f) => path.relative(repoRoot, f)), []);
});

/**
 * Folders of test/ that are no room of src/: the native code's unit tests, the GPU suite, the
 * package as it ships, the benchmarks' own parts, and what the suite itself runs on.
 */
const TEST_FOLDERS = ['native', 'gpu', 'package', 'bench', 'fixtures', 'scenarios', 'types', 'asan', 'fake-driver'];

test("tests mirror the layout: each folder of test/ is a room of src/ or one of the suite's own, and no test file lies loose", () => {
  const rooms = new Set(FLOORS.filter((f) => f !== '(face)'));
  const strays: string[] = [];
  for (const e of fs.readdirSync(path.join(repoRoot, 'test'), { withFileTypes: true })) {
    if (e.isDirectory() && !rooms.has(e.name) && !TEST_FOLDERS.includes(e.name)) strays.push(`test/${e.name}/`);
    // This file checks the whole tree, so it belongs to no room.
    if (e.isFile() && e.name.endsWith('.test.ts') && e.name !== 'architecture.test.ts') strays.push(`test/${e.name}`);
  }
  assert.deepEqual(strays, []);
});
