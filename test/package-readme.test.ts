/** The README's reference names every export of the package (values and types). */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { it } from 'node:test';
import ts from 'typescript';
import { repoRoot } from './helpers.js';

it('the README reference section names every export', () => {
  const entry = path.join(repoRoot, 'src/index.ts');
  const program = ts.createProgram([entry], { module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext, noEmit: true, skipLibCheck: true, types: [] });
  const checker = program.getTypeChecker();
  const names = checker.getExportsOfModule(checker.getSymbolAtLocation(program.getSourceFile(entry)!)!).map((s) => s.getName());
  assert.ok(names.length > 30, `found ${names.length} exports`);
  const readme = fs.readFileSync(path.join(repoRoot, 'README.md'), 'utf8');
  const m = /\n## Reference\n([\s\S]*?)\n## /.exec(readme);
  assert.ok(m, 'README.md has a Reference section');
  const missing = names.filter((n) => !new RegExp(`\`${n}[\`(]`).test(m[1]!));
  assert.deepEqual(missing, [], 'add these to the Reference section of README.md');
});
