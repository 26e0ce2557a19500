/**
 * `penstock serve [--socket PATH] [--budget BYTES|N%] [--preload SPEC]... [--allow-uid UID]...`:
 * runs the daemon that keeps tensor sets resident in GPU memory until SIGINT or SIGTERM.
 */
import path from 'node:path';
import { formatSize } from '../../settings/config.js';
import { startServer, type ServeDaemon } from '../../serve/server.js';
import { onEarlyEnd } from '../kit/process-end.js';
import { defaultSocketPath } from '../../serve/socket-path.js';
import type { ServeBudget } from '../../serve/resident-sets.js';
import type { SetSpec } from '../../serve/protocol.js';
import { ArgError, parseIntArg, parseSizeArg } from '../kit/args.js';
import type { ParsedLine } from '../kit/command.js';

/** The budget from `--budget`: a size (`24GiB`) or a share of each GPU's memory (`80%`). */
export function parseBudget(text: string): ServeBudget {
  const pct = /^\s*(\d+(?:\.\d+)?)\s*%\s*$/.exec(text);
  if (pct) {
    const percent = Number(pct[1]);
    if (!(percent > 0 && percent <= 100)) throw new ArgError(`--budget must be a share from 0% to 100%, got '${text}'`);
    return { percent };
  }
  return { bytes: parseSizeArg(text, '--budget') };
}

/** A `--preload` value as a set spec (relative paths resolved here). */
export function parsePreload(text: string): SetSpec {
  if (text.trim().startsWith('{')) {
    try {
      return JSON.parse(text) as SetSpec;
    } catch (err) {
      throw new ArgError(`--preload is not valid JSON: ${(err as Error).message}`);
    }
  }
  const paths = text.split(',').filter((p) => p !== '').map((p) => (/^(s3|https?):\/\//i.test(p) ? p : path.resolve(p)));
  if (paths.length === 0) throw new ArgError('--preload needs a path');
  return { path: paths };
}

/** Runs `penstock serve`. */
export async function runServeCli({ values, all }: ParsedLine): Promise<number> {
  const socket = path.resolve(typeof values.socket === 'string' ? values.socket : defaultSocketPath());
  const budget = typeof values.budget === 'string' ? parseBudget(values.budget) : { percent: 90 };
  const preload = (all?.preload ?? []).map(parsePreload);
  const allowUids = (all?.['allow-uid'] ?? []).map((u) => parseIntArg(u, '--allow-uid', 0, 2 ** 32 - 1));
  const json = values['log-json'] === true;
  const log = (event: string, fields: Record<string, unknown> = {}) =>
    process.stdout.write(json ? `${JSON.stringify({ event, ...fields })}\n` : `penstock serve: ${event}${Object.keys(fields).length ? ` ${JSON.stringify(fields)}` : ''}\n`);
  // SIGINT and SIGTERM end the process as they end every command (status 130, 143); the daemon's
  // GPU memory and connections go with the process, and only its socket file needs removing.
  let daemon: ServeDaemon | undefined;
  onEarlyEnd(() => daemon?.removeSocket());
  daemon = await startServer({ socket, budget, preload, allowUids, log: (line) => log(line) });
  const shown = 'bytes' in budget ? formatSize(budget.bytes) : `${budget.percent}% of each GPU`;
  log(`listening on ${socket}`, { pid: process.pid, budget: shown, preloaded: daemon.sets.list().length });
  // Serves until a signal ends the process.
  return new Promise<number>(() => {});
}
