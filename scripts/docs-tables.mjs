#!/usr/bin/env node
// Writes the generated reference tables from the code's own tables: the settings into
// docs/settings.md and the error codes into docs/errors.md, between their
// <!-- name:begin --> / <!-- name:end --> markers. `--check` only reports whether they are
// current (exit 1 when not). Needs the TypeScript built first (npm run build:ts).
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const { settingsTableMarkdown } = await import(path.join(root, 'dist/src/settings/table.js'));
const { errorTableMarkdown } = await import(path.join(root, 'dist/src/error-catalog.js'));

const targets = [
  { file: 'docs/settings.md', name: 'settings', body: settingsTableMarkdown() },
  { file: 'docs/errors.md', name: 'errors', body: errorTableMarkdown() },
];
const check = process.argv.includes('--check');
let stale = false;
for (const { file, name, body } of targets) {
  const full = path.join(root, file);
  const before = fs.readFileSync(full, 'utf8');
  const re = new RegExp(`(<!-- ${name}:begin -->\\n)[\\s\\S]*?(\\n<!-- ${name}:end -->)`);
  if (!re.test(before)) {
    console.error(`${file}: no <!-- ${name}:begin --> … <!-- ${name}:end --> section`);
    process.exit(1);
  }
  const after = before.replace(re, (_, open, close) => open + body + close);
  if (after === before) continue;
  stale = true;
  if (check) console.error(`${file}: the generated ${name} table is out of date; run npm run docs:tables`);
  else {
    fs.writeFileSync(full, after);
    console.error(`${file}: ${name} table updated`);
  }
}
if (check && stale) process.exit(1);
