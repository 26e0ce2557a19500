/**
 * `penstock serve [--socket PATH] [--budget BYTES|N%] [--preload SPEC]... [--allow-uid UID]...`:
 * runs the daemon that keeps tensor sets resident in GPU memory until SIGINT or SIGTERM.
 */
import { formatSize } from '../../settings/config.js';
import { startServer } from '../../serve/server.js';
import { defaultSocketPath } from '../../serve/socket-path.js';
import type { ServeBudget } from '../../serve/resident-sets.js';
import type { SetSpec } from '../../serve/protocol.js';
import { EXIT, EXIT_HELP, runCommand } from '../common.js';
import { ArgError, parseCommandLine, parseIntArg, parseSizeArg } from '../kit/args.js';
import path from 'node:path';

const HELP = `Usage: penstock serve [options]

Keeps tensor sets resident in GPU memory and hands them to other processes
(Node, PyTorch) over a Unix socket, through CUDA IPC. Runs until SIGINT or
SIGTERM; then every set is freed and the socket removed.

Options:
  --socket PATH      where to listen (default ${defaultSocketPath()}); the
                     folder is made 0700 and must be this user's alone
  --budget SIZE|N%   GPU memory the sets may fill on each GPU (default 90%)
  --preload SPEC     load a set before serving (repeatable): a path or URL,
                     several joined by commas, or a JSON set spec such as
                     '{"path":["/m/a.safetensors"],"device":1}'
  --allow-uid UID    also serve this user id (repeatable)
  --json             log one JSON object per line
  -h, --help         this text

${EXIT_HELP}`;

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
export async function runServeCli(argv: string[]): Promise<number> {
  return runCommand('serve', async () => {
    const { values: v, positionals } = parseCommandLine({
      args: argv,
      allowPositionals: true,
      options: {
        socket: { type: 'string' },
        budget: { type: 'string' },
        preload: { type: 'string', multiple: true },
        'allow-uid': { type: 'string', multiple: true },
        json: { type: 'boolean', default: false },
        help: { type: 'boolean', short: 'h', default: false },
      },
    });
    if (v.help) {
      process.stdout.write(HELP);
      return EXIT.ok;
    }
    if (positionals.length > 0) throw new ArgError(`unexpected argument '${positionals[0]}'`);
    const socket = path.resolve(v.socket ?? defaultSocketPath());
    const budget = v.budget === undefined ? { percent: 90 } : parseBudget(v.budget);
    const preload = (v.preload ?? []).map(parsePreload);
    const allowUids = (v['allow-uid'] ?? []).map((u) => parseIntArg(u, '--allow-uid', 0, 2 ** 32 - 1));
    const log = (event: string, fields: Record<string, unknown> = {}) =>
      process.stdout.write(v.json ? `${JSON.stringify({ event, ...fields })}\n` : `penstock serve: ${event}${Object.keys(fields).length ? ` ${JSON.stringify(fields)}` : ''}\n`);
    // The handlers are in place before anyone can learn that the daemon listens.
    let stop!: () => void;
    const stopped = new Promise<void>((resolve) => (stop = resolve));
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
    const daemon = await startServer({ socket, budget, preload, allowUids, log: (line) => log(line) });
    const shown = 'bytes' in budget ? formatSize(budget.bytes) : `${budget.percent}% of each GPU`;
    log(`listening on ${socket}`, { pid: process.pid, budget: shown, preloaded: daemon.sets.list().length });
    await stopped;
    await daemon.close();
    log('stopped');
    return EXIT.ok;
  });
}
