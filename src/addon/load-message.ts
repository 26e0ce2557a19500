/**
 * The one message shown when the native addon cannot be loaded: what was tried, what the prebuilt
 * binaries cover, and the one command that compiles the addon from source.
 */
import process from 'node:process';

/** The oldest glibc the prebuilt Linux binaries load with (they are linked against it). */
export const PREBUILT_GLIBC_FLOOR = '2.28';

/** The message of `ERR_PENSTOCK_ADDON_LOAD`, given each place tried and why it did not load. */
export function addonLoadMessage(tried: readonly string[]): string {
  const target = `${process.platform}-${process.arch}`;
  const prebuilt = process.platform === 'linux' && (process.arch === 'x64' || process.arch === 'arm64');
  return [
    `penstock: the native addon could not be loaded (${target}, Node.js ${process.versions.node}).`,
    ...tried.map((t) => `  tried ${t}`),
    prebuilt
      ? `  The prebuilt binary for ${target} needs glibc ${PREBUILT_GLIBC_FLOOR} or newer (musl is not covered).`
      : `  No prebuilt binary ships for ${target}.`,
    '  To compile it from source (needs python3, make and a C++17 compiler; no CUDA toolkit), run in your app:',
    '    npx penstock-build        (Yarn Plug\'n\'Play: yarn penstock-build)',
  ].join('\n');
}
