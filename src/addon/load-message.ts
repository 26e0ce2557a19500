/**
 * The one message shown when the native addon cannot be loaded: what was tried and the fix for
 * the package manager that installed penstock (npm, pnpm and yarn each gate build scripts
 * differently).
 */
import process from 'node:process';

/** The message of `ERR_PENSTOCK_ADDON_LOAD`, given the loader's own error. */
export function addonLoadMessage(detail: string): string {
  const target = `${process.platform}-${process.arch}`;
  const prebuilt = process.platform === 'linux' && (process.arch === 'x64' || process.arch === 'arm64');
  return [
    `penstock: the native addon could not be loaded (${target}, Node.js ${process.versions.node}).`,
    prebuilt
      ? '  A prebuilt binary ships for this platform; it needs glibc 2.34 or newer (musl is not covered).'
      : `  No prebuilt binary ships for ${target}: the addon must be compiled at install time.`,
    '  Compiling needs python3, make and a C++17 compiler; then rebuild it:',
    '    npm:  npm rebuild penstock --foreground-scripts',
    '    pnpm: pnpm 10 skips build scripts unless allowed: run "pnpm approve-builds" (or list',
    '          penstock in pnpm.onlyBuiltDependencies in package.json), then "pnpm rebuild penstock"',
    '    yarn: yarn rebuild penstock (Yarn 1: npm rebuild penstock); with enableScripts: false,',
    '          allow penstock under dependenciesMeta in package.json',
    `  Loader said: ${detail.trim()}`,
  ].join('\n');
}
