/**
 * The package's entry points as package.json `exports` lists them (the root first): the specifier
 * users write, the TypeScript source, the built module and its declarations. The tests of the
 * face, of docs/api.md and of the installed package all read them from here.
 */
import fs from 'node:fs';
import path from 'node:path';
import { repoRoot } from './helpers.js';

/** One entry point of the package. */
export interface EntryPoint {
  /** The key in `exports`: `.` or `./formats`. */
  subpath: string;
  /** What users import: `penstock` or `penstock/formats`. */
  specifier: string;
  /** The TypeScript file under src/. */
  source: string;
  /** The built module under dist/src/. */
  built: string;
  /** Its type declarations. */
  types: string;
}

type Target = string | { types: string; default: string };
const manifest = JSON.parse(fs.readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as { name: string; exports: Record<string, Target> };

/** Every module entry point of `exports` (`./package.json` is not one). */
export const ENTRY_POINTS: readonly EntryPoint[] = Object.entries(manifest.exports)
  .filter((e): e is [string, { types: string; default: string }] => typeof e[1] === 'object')
  .map(([subpath, target]) => {
    const built = path.join(repoRoot, target.default);
    return {
      subpath,
      specifier: subpath === '.' ? manifest.name : `${manifest.name}/${subpath.slice(2)}`,
      source: path.join(repoRoot, path.relative(path.join(repoRoot, 'dist'), built)).replace(/\.js$/, '.ts'),
      built,
      types: path.join(repoRoot, target.types),
    };
  });

/** Code for a child process that binds every export of every entry point to one object, `name`. */
export function importEveryEntry(name = 'p'): string {
  return `const ${name} = Object.assign({}, ...(await Promise.all(${JSON.stringify(ENTRY_POINTS.map((e) => e.built))}.map((f) => import(f)))));`;
}
