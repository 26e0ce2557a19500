/**
 * `penstock doctor`: which route each file's device reads take here, and why; or, with
 * --gdscheck, what a `gdscheck -p` report from another machine says. Exit status: 0 when the
 * report was made, 1 when a path does not exist or the doctor failed, 2 for bad usage, 3 with
 * --require-gds when a path would not get (or did not get) the direct path.
 */
import fs from 'node:fs';
import { parseArgs } from 'node:util';
import { parseSize } from '../settings/config.js';
import { diagnose, render } from '../doctor/index.js';
import { readGdscheck } from '../doctor/gdscheck.js';
import { renderGdscheck } from '../doctor/report.js';

/** The doctor's exit statuses. */
export const DOCTOR_EXIT = { ok: 0, failed: 1, usage: 2, notDirect: 3 } as const;

const USAGE = `usage: penstock doctor [PATH...] [options]
       penstock doctor --gdscheck FILE|-

Says which route device reads of each PATH take on this machine (default:
the current directory), why, and what to change for the direct path.

  --json           print the report as JSON
  --probe          read each file into GPU memory in a child process and
                   report the measured route, with cuFile's own log lines
  --offset N       predict (and probe) the read starting at byte N
  --size N         ... of N bytes (suffixes KiB, MiB, GiB; default: to EOF)
  --target-offset N  ... into the GPU buffer at byte N (default 0)
  --require-gds    exit 3 unless every path gets the direct path
  --gdscheck FILE  read a 'gdscheck -p' report (FILE, or - for stdin)
                   instead of this machine
  -h, --help       show this help

Exit status: 0 report made, 1 a path does not exist or the doctor failed,
2 bad usage, 3 --require-gds and a path misses the direct path.
`;

function usageError(message: string): number {
  process.stderr.write(`penstock doctor: ${message}\n${USAGE}`);
  return DOCTOR_EXIT.usage;
}

function size(name: string, text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const n = /^\d+$/.test(text) ? Number(text) : parseSize(text);
  if (!Number.isSafeInteger(n) || n < 0) throw new Error(`--${name} must be a whole number of bytes, not '${text}'`);
  return n;
}

export async function runDoctorCli(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        json: { type: 'boolean', default: false },
        probe: { type: 'boolean', default: false },
        'require-gds': { type: 'boolean', default: false },
        offset: { type: 'string' },
        size: { type: 'string' },
        'target-offset': { type: 'string' },
        gdscheck: { type: 'string' },
        help: { type: 'boolean', short: 'h', default: false },
      },
    });
  } catch (err) {
    return usageError((err as Error).message);
  }
  const { values, positionals } = parsed;
  if (values.help) {
    process.stdout.write(USAGE);
    return DOCTOR_EXIT.ok;
  }
  const colour = Boolean(process.stdout.isTTY) && !process.env.NO_COLOR;
  if (values.gdscheck !== undefined) {
    if (positionals.length || values.probe || values.offset !== undefined || values.size !== undefined || values['target-offset'] !== undefined)
      return usageError('--gdscheck reads a report; it takes no PATH, --probe, --offset or --size');
    let text: string;
    try {
      text = fs.readFileSync(values.gdscheck === '-' ? 0 : values.gdscheck, 'utf8');
    } catch (err) {
      process.stderr.write(`penstock doctor: cannot read ${values.gdscheck === '-' ? 'stdin' : values.gdscheck}: ${(err as Error).message}\n`);
      return DOCTOR_EXIT.failed;
    }
    const report = readGdscheck(text, values.gdscheck === '-' ? 'stdin' : values.gdscheck);
    if (values.json) process.stdout.write(JSON.stringify(report, null, 2) + '\n');
    else process.stdout.write(renderGdscheck(report, { colour }));
    if (!report.parsed.gdsVersion && !Object.keys(report.parsed.drivers).length) {
      process.stderr.write('penstock doctor: this does not look like gdscheck -p output\n');
      return DOCTOR_EXIT.failed;
    }
    return values['require-gds'] && !report.checks.some((c) => c.id === 'platform.cufile.driver' && c.status === 'pass') ? DOCTOR_EXIT.notDirect : DOCTOR_EXIT.ok;
  }
  let shape: { offset: number; size?: number } | undefined;
  try {
    const offset = size('offset', values.offset);
    const length = size('size', values.size);
    const target = size('target-offset', values['target-offset']);
    if (offset !== undefined || length !== undefined || target !== undefined)
      shape = { offset: offset ?? 0, ...(length !== undefined ? { size: length } : {}), ...(target ? { targetOffset: target } : {}) };
  } catch (err) {
    return usageError((err as Error).message);
  }
  let report;
  try {
    report = await diagnose(positionals, {
      probe: values.probe,
      ...(shape ? { shape } : {}),
      ...(process.env.PENSTOCK_DOCTOR_ROOT ? { root: process.env.PENSTOCK_DOCTOR_ROOT } : {}),
    });
  } catch (err) {
    const e = err as { code?: string; message?: string };
    process.stderr.write(`penstock doctor failed: ${e.code ? `[${e.code}] ` : ''}${e.message ?? String(err)}\n`);
    return DOCTOR_EXIT.failed;
  }
  if (values.json) process.stdout.write(JSON.stringify(report, null, 2) + '\n');
  else process.stdout.write(render(report, { colour }));
  const missing = report.paths.filter((p) => !p.checks.find((c) => c.id === 'path.exists')?.data?.exists);
  for (const p of missing) process.stderr.write(`penstock doctor: ${p.path}: no such file or directory (examined through ${p.checks.find((c) => c.id === 'path.exists')?.data?.examined})\n`);
  if (missing.length) return DOCTOR_EXIT.failed;
  return values['require-gds'] && !report.allDirect ? DOCTOR_EXIT.notDirect : DOCTOR_EXIT.ok;
}
