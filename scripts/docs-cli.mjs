#!/usr/bin/env node
// Writes what is generated from the command table (src/cli/commands.ts) and the settings table:
// docs/cli.md, the README's command section, and the remote settings in docs/remote.md (between
// <!-- name:begin --> / <!-- name:end --> markers). `--check` only reports whether they are current
// (exit 1 when not). Needs the TypeScript built first (npm run build:ts).
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const { cliMarkdown, cliReadmeSection } = await import(path.join(root, 'dist/src/cli/help.js'));
const { settingsTableMarkdown } = await import(path.join(root, 'dist/src/settings/table.js'));

const [head, rule, ...rest] = settingsTableMarkdown().split('\n');
const remoteSettings = [head, rule, ...rest.filter((l) => l.startsWith('| `remote'))].join('\n');

const check = process.argv.includes('--check');
let stale = false;

function update(file, make) {
  const full = path.join(root, file);
  const before = fs.existsSync(full) ? fs.readFileSync(full, 'utf8') : '';
  const after = make(before);
  if (after === before) return;
  stale = true;
  if (check) console.error(`${file}: out of date; run npm run docs:cli`);
  else {
    fs.writeFileSync(full, after);
    console.error(`${file}: updated`);
  }
}

function section(name, body) {
  return (text) => {
    const re = new RegExp(`(<!-- ${name}:begin -->\\n)[\\s\\S]*?(\\n<!-- ${name}:end -->)`);
    if (!re.test(text)) throw new Error(`no <!-- ${name}:begin --> … <!-- ${name}:end --> section`);
    return text.replace(re, (_, open, close) => open + body + close);
  };
}

update('docs/cli.md', () => cliMarkdown());
update('README.md', section('cli', cliReadmeSection()));
update('docs/remote.md', section('remote-settings', remoteSettings));
if (check && stale) process.exit(1);
