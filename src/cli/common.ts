/**
 * What every `penstock` command shares: exit statuses, the usage-error path, how errors are
 * shown, and when to use colour.
 */
import { terminalText } from '../vocabulary/terminal-text.js';
import { ArgError } from './kit/args.js';

/** Exit statuses of every command (docs/cli.md lists each command's own). */
export const EXIT = {
  /** The command did what it was asked. */
  ok: 0,
  /** It ran and failed (a read failed, a setting is unusable, the addon is not loaded). */
  failure: 1,
  /** The command line was wrong: nothing was done. */
  usage: 2,
  /** A check that was asked for failed: `load --verify` found a mismatch, `doctor --require-gds` a path without the direct path. */
  checkFailed: 3,
} as const;

/**
 * An error as one message for stderr: `[CODE] message`, with control characters escaped (the
 * message may carry a file's or a server's text) and its lines kept.
 */
export function describeError(err: unknown): string {
  const e = err as { code?: unknown; message?: unknown };
  const code = typeof e?.code === 'string' ? `[${e.code}] ` : '';
  const message = typeof e?.message === 'string' ? e.message : String(err);
  return terminalText(`${code}${message}`, { keepLines: true });
}

/**
 * Whether to write ANSI colours to `stream`: `FORCE_COLOR` (any value but 0 or false) forces
 * them on, `NO_COLOR` (any non-empty value) or `TERM=dumb` off, otherwise only on a terminal.
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
    process.stderr.write(`penstock ${name}: ${terminalText(e.message)}\nRun "penstock ${name} --help" for the options.\n`);
    return EXIT.usage;
  }
}

/** Whether progress bars may be drawn: on a terminal (stderr) unless `--no-progress`. */
export function progressWanted(values: Readonly<Record<string, unknown>>): boolean {
  return values['no-progress'] !== true && process.stderr.isTTY === true;
}
