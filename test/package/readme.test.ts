/**
 * docs/api.md has one section per entry point of the package (`## \`penstock/formats\``), and each
 * names every export of its entry point (values and types), and nothing else.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { ENTRY_POINTS } from '../entry-points.js';
import { declaredExports } from './face-exports.js';
import { repoRoot } from '../helpers.js';

const page = fs.readFileSync(path.join(repoRoot, 'docs/api.md'), 'utf8');

/** The page's sections by entry point: the text under each `## \`specifier\`` heading. */
function sections(): Map<string, string> {
  const parts = page.split(/^## `([\w/-]+)`$/m);
  const out = new Map<string, string>();
  for (let i = 1; i < parts.length; i += 2) {
    assert.ok(!out.has(parts[i]!), `docs/api.md has two sections for ${parts[i]}`);
    out.set(parts[i]!, parts[i + 1]!);
  }
  return out;
}

/** The names a section documents: its `### \`name\`` headings and the first cells of its type table. */
function documentedNames(section: string): string[] {
  return [...section.matchAll(/^### `(\w+)`$/gm), ...section.matchAll(/^\| `(\w+)` \|/gm)].map((m) => m[1]!);
}

describe('docs/api.md', () => {
  it('has a section for each entry point, in the order of exports, and no other', () => {
    assert.deepEqual([...sections().keys()], ENTRY_POINTS.map((e) => e.specifier));
  });

  for (const entry of ENTRY_POINTS)
    it(`documents every export of ${entry.specifier} in its section, each once, and nothing else`, () => {
      const section = sections().get(entry.specifier) ?? '';
      const names = declaredExports().names.filter((n) => n.specifier === entry.specifier).map((n) => n.name);
      assert.ok(names.length > 0, `${entry.specifier} exports nothing`);
      const documented = documentedNames(section);
      assert.deepEqual(names.filter((n) => !documented.includes(n)), [], `add these to the ${entry.specifier} section (a ### heading with signature and example, or a row of its types table)`);
      assert.deepEqual(documented.filter((n) => !names.includes(n)), [], `the ${entry.specifier} section documents these, which it does not export`);
      assert.deepEqual(documented.filter((n, i) => documented.indexOf(n) !== i), [], 'documented twice');
      assert.match(section, new RegExp(`from '${entry.specifier}'`), `the ${entry.specifier} section shows its import`);
    });

  it('gives each value export an example', () => {
    for (const section of page.split(/^### /m).slice(1)) {
      const name = /^`(\w+)`/.exec(section)?.[1];
      assert.ok(name, `a ### heading names an export: ${section.slice(0, 40)}`);
      assert.match(section, /```ts\n.+\n```/, `${name}: an example in a ts block`);
      assert.ok(section.includes(name), `${name}: named in its section`);
    }
  });
});
