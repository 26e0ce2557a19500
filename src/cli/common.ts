/**
 * What every `penstock` command shares: exit statuses, the usage-error path, and when to use
 * colour and progress bars.
 */
import { ArgError } from './kit/args.js';

/** Exit statuses of every command (doctor adds 3 for --require-gds). */
export const EXIT = {
  /** The command did what it was asked. */
  ok: 0,
  /** It ran and failed (a read failed, data did not verify, a setting is unusable). */
  failure: 1,
  /** The command line was wrong: nothing was done. */
  usage: 2,
} as const;

/** The lines every help text ends with. */
export const EXIT_HELP = 'Exit status: 0 success, 1 failure, 2 usage error.\n';

/**
 * Whether to write ANSI colours to `stream`: `FORCE_COLOR` (any value but 0 or false) forces
 * them on, `NO_COLOR` (any non-empty value) off, otherwise only on a terminal that is not "dumb".
 */
export function colourEnabled(stream: { isTTY?: boolean }, env: NodeJS.ProcessEnv = process.env): boolean {
  const force = env.FORCE_COLOR;
  if (force !== undefined) return !/^(0|false)$/i.test(force);
  if (env.NO_COLOR !== undefined && env.NO_COLOR !== '') return false;
  return Boolean(stream.isTTY) && env.TERM !== 'dumb';
}

/** A painter for one stream: `paint('32', 'ok')` is green where colour is enabled, plain elsewhere. */
export function painter(stream: { isTTY?: boolean }, env: NodeJS.ProcessEnv = process.env): (sgr: string, text: string) => string {
  const on = colourEnabled(stream, env);
  return (sgr, text) => (on ? `\x1b[${sgr}m${text}\x1b[0m` : text);
}

/**
 * Runs one command: a usage error (ArgError) prints its message and a pointer to `--help` and
 * exits 2; any other error propagates to main, which prints it and exits 1.
 */
export async function runCommand(name: string, body: () => Promise<number>): Promise<number> {
  try {
    return await body();
  } catch (e) {
    if (!(e instanceof ArgError)) throw e;
    process.stderr.write(`penstock ${name}: ${e.message}\nRun "penstock ${name} --help" for the options.\n`);
    return EXIT.usage;
  }
}
