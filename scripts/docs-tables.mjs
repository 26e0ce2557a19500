#!/usr/bin/env node
// Writes the README's generated tables (settings, error codes) from the code's own tables, between
// their <!-- name:begin --> / <!-- name:end --> markers. `--check` only reports whether they are
// current (exit 1 when not). Needs the TypeScript built first (npm run build:ts).
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const { settingsTableMarkdown } = await import(path.join(root, 'dist/src/settings/table.js'));
const { errorTableMarkdown } = await import(path.join(root, 'dist/src/error-catalog.js'));

const sections = { settings: settingsTableMarkdown(), errors: errorTableMarkdown() };
const file = path.join(root, 'README.md');
const before = fs.readFileSync(file, 'utf8');
let after = before;
for (const [name, body] of Object.entries(sections)) {
  const re = new RegExp(`(<!-- ${name}:begin -->\\n)[\\s\\S]*?(\\n<!-- ${name}:end -->)`);
  if (!re.test(after)) {
    console.error(`README.md: no <!-- ${name}:begin --> … <!-- ${name}:end --> section`);
    process.exit(1);
  }
  after = after.replace(re, (_, open, close) => open + body + close);
}
if (process.argv.includes('--check')) {
  if (after !== before) {
    console.error('README.md: generated tables are out of date; run npm run docs:tables');
    process.exit(1);
  }
} else if (after !== before) {
  fs.writeFileSync(file, after);
  console.error('README.md: tables updated');
}
