/** `penstock version`: the version of penstock. */
import { readFileSync } from 'node:fs';
import { EXIT } from './common.js';

/** The version in penstock's package.json. */
export function packageVersion(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version: string };
  return pkg.version;
}

/** Runs `penstock version`; resolves to the exit status. */
export async function runVersion(): Promise<number> {
  process.stdout.write(`${packageVersion()}\n`);
  return EXIT.ok;
}
