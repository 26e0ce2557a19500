/**
 * `penstock doctor`: which route each file's device reads take here, and why; or, with
 * --gdscheck, what a `gdscheck -p` report from another machine says. Exit status: 0 when the
 * report was made, 1 when a path does not exist, a PENSTOCK_* variable is unusable or the doctor
 * failed, 2 for bad usage, 3 with --require-gds when a path would not get (or did not get) the
 * direct path.
 */
import fs from 'node:fs';
import { parseSize, readEnvironment } from '../settings/config.js';
import { diagnose, render } from '../doctor/index.js';
import { readGdscheck } from '../doctor/gdscheck.js';
import { renderGdscheck } from '../doctor/report.js';
import { terminalJson, terminalText } from '../vocabulary/terminal-text.js';
import { ArgError } from './kit/args.js';
import type { ParsedLine } from './kit/command.js';
import { EXIT, colourEnabled, describeError } from './common.js';

/** The doctor's exit statuses. */
export const DOCTOR_EXIT = { ok: EXIT.ok, failed: EXIT.failure, usage: EXIT.usage, notDirect: EXIT.checkFailed } as const;

function size(name: string, text: string | true | undefined): number | undefined {
  if (typeof text !== 'string') return undefined;
  let n: number;
  try {
    n = /^\d+$/.test(text) ? Number(text) : parseSize(text);
  } catch {
    n = NaN;
  }
  if (!Number.isSafeInteger(n) || n < 0) throw new ArgError(`--${name} must be a whole number of bytes, not '${text}'`);
  return n;
}

/** Runs `penstock doctor`; resolves to the exit status. */
export async function runDoctorCli({ values, positionals }: ParsedLine): Promise<number> {
  const colour = colourEnabled(process.stdout);
  if (typeof values.gdscheck === 'string') return gdscheck(values.gdscheck, values, positionals, colour);
  const offset = size('offset', values.offset);
  const length = size('size', values.size);
  const target = size('target-offset', values['target-offset']);
  const shape = offset !== undefined || length !== undefined || target !== undefined
    ? { offset: offset ?? 0, ...(length !== undefined ? { size: length } : {}), ...(target ? { targetOffset: target } : {}) }
    : undefined;
  // An unusable PENSTOCK_* variable stops the driver and cuFile from being examined at all; the
  // report would blame them. Say what is wrong instead.
  const { problems } = readEnvironment();
  if (problems.length) {
    for (const p of problems) process.stderr.write(`penstock doctor: [${p.code}] ${terminalText(p.message)}\n`);
    process.stderr.write(`penstock doctor: fix or unset ${problems.map((p) => p.variable).join(', ')}; nothing was examined\n`);
    return DOCTOR_EXIT.failed;
  }
  let report;
  try {
    report = await diagnose([...positionals], {
      probe: values.probe === true,
      ...(shape ? { shape } : {}),
      ...(process.env.PENSTOCK_DOCTOR_ROOT ? { root: process.env.PENSTOCK_DOCTOR_ROOT } : {}),
    });
  } catch (err) {
    process.stderr.write(`penstock doctor failed: ${describeError(err)}\n`);
    return DOCTOR_EXIT.failed;
  }
  if (values.json) process.stdout.write(terminalJson(report) + '\n');
  else process.stdout.write(render(report, { colour }));
  const missing = report.paths.filter((p) => !p.checks.find((c) => c.id === 'path.exists')?.data?.exists);
  for (const p of missing)
    process.stderr.write(`penstock doctor: ${terminalText(p.path)}: no such file or directory (examined through ${terminalText(String(p.checks.find((c) => c.id === 'path.exists')?.data?.examined))})\n`);
  if (missing.length) return DOCTOR_EXIT.failed;
  return values['require-gds'] && !report.allDirect ? DOCTOR_EXIT.notDirect : DOCTOR_EXIT.ok;
}

async function gdscheck(file: string, values: ParsedLine['values'], positionals: readonly string[], colour: boolean): Promise<number> {
  if (positionals.length || values.probe || values.offset !== undefined || values.size !== undefined || values['target-offset'] !== undefined)
    throw new ArgError('--gdscheck reads a report; it takes no PATH, --probe, --offset or --size');
  const source = file === '-' ? 'stdin' : file;
  let text: string;
  try {
    text = fs.readFileSync(file === '-' ? 0 : file, 'utf8');
  } catch (err) {
    process.stderr.write(`penstock doctor: cannot read ${terminalText(source)}: ${describeError(err)}\n`);
    return DOCTOR_EXIT.failed;
  }
  const report = readGdscheck(text, source);
  if (values.json) process.stdout.write(terminalJson(report) + '\n');
  else process.stdout.write(renderGdscheck(report, { colour }));
  if (!report.parsed.gdsVersion && !Object.keys(report.parsed.drivers).length) {
    process.stderr.write('penstock doctor: this does not look like gdscheck -p output\n');
    return DOCTOR_EXIT.failed;
  }
  return values['require-gds'] && !report.checks.some((c) => c.id === 'platform.cufile.driver' && c.status === 'pass') ? DOCTOR_EXIT.notDirect : DOCTOR_EXIT.ok;
}
