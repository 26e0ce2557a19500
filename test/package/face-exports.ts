/**
 * What each entry point declares, read by the TypeScript compiler from the sources: its value
 * exports (what exists at run time) and its type-only exports, and the declaration each name
 * stands for.
 */
import ts from 'typescript';
import { ENTRY_POINTS } from '../entry-points.js';

/** One exported name of an entry point. */
export interface ExportedName {
  /** The entry point's specifier (`penstock/formats`). */
  specifier: string;
  /** The name users import. */
  name: string;
  /** Whether it exists at run time (a function, class, constant), not only as a type. */
  value: boolean;
  /** The declaration it resolves to, through every re-export. */
  target: ts.Symbol;
}

let cached: { names: ExportedName[]; checker: ts.TypeChecker } | undefined;

/** Every exported name of every entry point, in the order of `exports` and of each file. */
export function declaredExports(): { names: ExportedName[]; checker: ts.TypeChecker } {
  if (cached) return cached;
  const program = ts.createProgram(ENTRY_POINTS.map((e) => e.source), { module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext, noEmit: true, skipLibCheck: true, types: [] });
  const checker = program.getTypeChecker();
  const names: ExportedName[] = [];
  for (const entry of ENTRY_POINTS) {
    const file = program.getSourceFile(entry.source);
    if (!file) throw new Error(`${entry.source} is missing`);
    for (const symbol of checker.getExportsOfModule(checker.getSymbolAtLocation(file)!)) {
      const target = symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol;
      // `export { type X }` and `export type { X }` give only the type, whatever X is.
      const typeOnly = (symbol.declarations ?? []).some((d) => ts.isExportSpecifier(d) && (d.isTypeOnly || d.parent.parent.isTypeOnly));
      names.push({ specifier: entry.specifier, name: symbol.getName(), value: !typeOnly && (target.flags & ts.SymbolFlags.Value) !== 0, target });
    }
  }
  cached = { names, checker };
  return cached;
}
