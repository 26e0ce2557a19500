/**
 * The public face: the root entry point stays small, every entry point of package.json `exports`
 * is a file of re-exports under src/ whose run-time exports are the values its types declare, and
 * nothing is reachable under two names or from two entry points.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import ts from 'typescript';
import { ENTRY_POINTS } from '../entry-points.js';
import { declaredExports } from './face-exports.js';
import { repoRoot } from '../helpers.js';

/**
 * How many values and types each entry point exports. Each name is a promise kept across minor
 * versions: a new one belongs in the entry point of its part (the root takes only what loading
 * needs), and changing a count here is a decision, made with docs/api.md and the changelog.
 */
const FACE: Record<string, { values: number; types: number }> = {
  penstock: { values: 26, types: 35 },
  'penstock/formats': { values: 15, types: 12 },
  'penstock/remote': { values: 9, types: 16 },
  'penstock/ipc': { values: 9, types: 10 },
  'penstock/serve': { values: 3, types: 6 },
  'penstock/batch': { values: 2, types: 8 },
  'penstock/doctor': { values: 4, types: 15 },
  'penstock/measure': { values: 8, types: 2 },
};

const isReExport = (s: ts.Statement) => ts.isExportDeclaration(s) && s.moduleSpecifier !== undefined;

describe('the entry points', () => {
  it('are listed in exports with their types first, each built from a file of re-exports under src/', () => {
    const manifest = JSON.parse(fs.readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as { exports: Record<string, unknown> };
    for (const [subpath, target] of Object.entries(manifest.exports)) {
      if (subpath === './package.json') continue;
      // Conditions match in order: a `types` after `default` would never be read.
      assert.deepEqual(Object.keys(target as object), ['types', 'default'], `${subpath}: { types, default }`);
    }
    for (const e of ENTRY_POINTS) {
      const file = ts.createSourceFile(e.source, fs.readFileSync(e.source, 'utf8'), ts.ScriptTarget.ES2022);
      assert.deepEqual(file.statements.filter((s) => !isReExport(s)).map((s) => s.getText(file)), [], `${e.specifier}: only re-exports`);
    }
  });

  it('are every file of re-exports under src/ (a new one is listed in exports)', () => {
    const src = path.join(repoRoot, 'src');
    const faces = fs.readdirSync(src).filter((f) => f.endsWith('.ts')).map((f) => path.join(src, f)).filter((f) => {
      const file = ts.createSourceFile(f, fs.readFileSync(f, 'utf8'), ts.ScriptTarget.ES2022);
      return file.statements.length > 0 && file.statements.every(isReExport);
    });
    assert.deepEqual(faces.sort(), ENTRY_POINTS.map((e) => e.source).sort());
  });

  it('keep the counts of names they export (the root small)', () => {
    const counts: Record<string, { values: number; types: number }> = {};
    for (const n of declaredExports().names) {
      const c = (counts[n.specifier] ??= { values: 0, types: 0 });
      if (n.value) c.values++;
      else c.types++;
    }
    assert.deepEqual(counts, FACE, 'a change of the public face: see FACE above');
  });

  it('load, each with exactly the run-time exports its types declare as values', async () => {
    for (const e of ENTRY_POINTS) {
      const loaded = Object.keys((await import(e.built)) as object).sort();
      const declared = declaredExports().names.filter((n) => n.specifier === e.specifier && n.value).map((n) => n.name).sort();
      assert.deepEqual(loaded, declared, e.specifier);
    }
  });

  it('reach no function, class or object under two names', async () => {
    const seen = new Map<unknown, string>();
    const twice: string[] = [];
    for (const e of ENTRY_POINTS)
      for (const [name, value] of Object.entries((await import(e.built)) as object)) {
        if ((typeof value !== 'object' && typeof value !== 'function') || value === null) continue;
        const where = `${e.specifier} ${name}`;
        if (seen.has(value)) twice.push(`${seen.get(value)} = ${where}`);
        else seen.set(value, where);
      }
    assert.deepEqual(twice, []);
  });

  it('declare each name once, and no type that only renames another', () => {
    const { names, checker } = declaredExports();
    const byName = new Map<string, string[]>();
    const byTarget = new Map<unknown, string[]>();
    for (const n of names) {
      byName.set(n.name, [...(byName.get(n.name) ?? []), n.specifier]);
      byTarget.set(n.target, [...(byTarget.get(n.target) ?? []), `${n.specifier} ${n.name}`]);
    }
    assert.deepEqual([...byName].filter(([, where]) => where.length > 1), [], 'one name, one entry point');
    assert.deepEqual([...byTarget.values()].filter((where) => where.length > 1), [], 'one declaration, one name');
    // `type B = A` with A exported too is the same type under a second name.
    const exported = new Set(names.map((n) => n.target));
    const renames = names.filter((n) => {
      const decl = n.target.declarations?.[0];
      if (!decl || !ts.isTypeAliasDeclaration(decl) || !ts.isTypeReferenceNode(decl.type) || decl.type.typeArguments) return false;
      const referred = checker.getSymbolAtLocation(decl.type.typeName);
      const resolved = referred && referred.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(referred) : referred;
      return resolved !== undefined && exported.has(resolved);
    });
    assert.deepEqual(renames.map((n) => `${n.specifier} ${n.name}`), []);
  });
});
