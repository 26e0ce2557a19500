#!/usr/bin/env node
// Counts the public exports and public members without TSDoc in the emitted type declarations
// (every entry point of package.json `exports`, and everything each exports), names each one with
// its file and line, and exits 1 when there is any. Run after `npm run build:ts`.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const { exports } = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
const entries = Object.values(exports).filter((t) => typeof t === 'object').map((t) => path.join(root, t.types));
const program = ts.createProgram(entries, { noEmit: true, skipLibCheck: true, types: [] });
const checker = program.getTypeChecker();
const missing = entries.filter((e) => !program.getSourceFile(e));
if (missing.length) {
  console.error(`check-tsdoc: ${missing.map((e) => path.relative(root, e)).join(', ')} not found (run npm run build:ts)`);
  process.exit(1);
}

const offenders = [];
let checked = 0;

function hasDoc(symbol, decl) {
  if (symbol.getDocumentationComment(checker).length > 0) return true;
  // A comment of tags only (`@param`, `@returns`, `@deprecated`, ...) still documents it.
  return ts.getJSDocCommentsAndTags(decl).length > 0;
}

function where(decl) {
  const file = decl.getSourceFile();
  const { line } = file.getLineAndCharacterOfPosition(decl.getStart());
  return `${path.relative(root, file.fileName)}:${line + 1}`;
}

function check(name, symbol, decl, kind) {
  checked++;
  if (!hasDoc(symbol, decl)) offenders.push({ name, kind, at: where(decl) });
}

const isPrivate = (decl) =>
  (ts.getCombinedModifierFlags(decl) & (ts.ModifierFlags.Private | ts.ModifierFlags.Protected)) !== 0 ||
  (decl.name && ts.isPrivateIdentifier(decl.name));

function checkMembers(owner, decl) {
  const members = decl.members ?? [];
  for (const m of members) {
    if (isPrivate(m)) continue;
    if (ts.isConstructorDeclaration(m)) {
      if (m.parameters.length === 0) continue;
      const sym = checker.getSymbolAtLocation(decl.name)?.members?.get('__constructor');
      checked++;
      if (!ts.getJSDocCommentsAndTags(m).length) offenders.push({ name: `${owner} constructor`, kind: 'constructor', at: where(m) });
      continue;
    }
    if (ts.isIndexSignatureDeclaration(m) || !m.name) continue;
    const sym = m.symbol ?? checker.getSymbolAtLocation(m.name);
    if (!sym) continue;
    check(`${owner}.${m.name.getText()}`, sym, m, ts.SyntaxKind[m.kind].replace(/Declaration|Signature/, '').toLowerCase());
  }
}

const exportsOfEntries = entries.flatMap((e) => checker.getExportsOfModule(checker.getSymbolAtLocation(program.getSourceFile(e))));
for (const exported of exportsOfEntries) {
  const symbol = exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported;
  const name = exported.getName();
  for (const decl of symbol.getDeclarations() ?? []) {
    // Overloads: one comment on the first signature documents the function.
    if (ts.isFunctionDeclaration(decl) && symbol.getDeclarations().indexOf(decl) > 0) continue;
    const kind = ts.SyntaxKind[decl.kind].replace('Declaration', '').toLowerCase();
    check(name, symbol, decl, kind);
    if (ts.isClassDeclaration(decl) || ts.isInterfaceDeclaration(decl)) checkMembers(name, decl);
    if (ts.isTypeAliasDeclaration(decl) && ts.isTypeLiteralNode(decl.type)) checkMembers(name, decl.type);
  }
}

for (const o of offenders.sort((a, b) => a.at.localeCompare(b.at, undefined, { numeric: true })))
  console.log(`undocumented ${o.kind.padEnd(9)} ${o.name.padEnd(40)} ${o.at}`);
console.log(`check-tsdoc: ${offenders.length} of ${checked} public exports and members have no TSDoc`);
process.exit(offenders.length ? 1 : 0);
