/** docs/api.md names every export of the package (values and types), and nothing else. */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { it } from 'node:test';
import ts from 'typescript';
import { repoRoot } from './helpers.js';

function exportNames(): string[] {
  const entry = path.join(repoRoot, 'src/index.ts');
  const program = ts.createProgram([entry], { module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext, noEmit: true, skipLibCheck: true, types: [] });
  const checker = program.getTypeChecker();
  return checker.getExportsOfModule(checker.getSymbolAtLocation(program.getSourceFile(entry)!)!).map((s) => s.getName());
}

/** The names docs/api.md documents: its `### \`name\`` headings and the first cells of its type table. */
function documentedNames(): string[] {
  const page = fs.readFileSync(path.join(repoRoot, 'docs/api.md'), 'utf8');
  return [...page.matchAll(/^### `(\w+)`$/gm), ...page.matchAll(/^\| `(\w+)` \|/gm)].map((m) => m[1]!);
}

it('docs/api.md documents every export of the package', () => {
  const names = exportNames();
  assert.ok(names.length > 30, `found ${names.length} exports`);
  const documented = new Set(documentedNames());
  const missing = names.filter((n) => !documented.has(n));
  assert.deepEqual(missing, [], 'add these to docs/api.md (a ### heading with signature and example, or a row of the Types table)');
});

it('docs/api.md documents nothing the package does not export, and each name once', () => {
  const names = new Set(exportNames());
  const documented = documentedNames();
  assert.deepEqual(documented.filter((n) => !names.has(n)), [], 'docs/api.md documents these, which src/index.ts does not export');
  assert.deepEqual(documented.filter((n, i) => documented.indexOf(n) !== i), [], 'documented twice in docs/api.md');
});

it('each value export in docs/api.md has an example', () => {
  const page = fs.readFileSync(path.join(repoRoot, 'docs/api.md'), 'utf8');
  const sections = page.split(/^### /m).slice(1);
  for (const section of sections) {
    const name = /^`(\w+)`/.exec(section)![1]!;
    assert.match(section, /```ts\n.+\n```/, `${name}: an example in a ts block`);
    assert.ok(section.includes(name), `${name}: named in its section`);
  }
});
