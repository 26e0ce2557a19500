/**
 * The report for people: grouped checks with ✓ ✗ ! · marks, the fix under each check that has
 * one, and a verdict per path.
 */
import type { GdscheckReport } from './gdscheck.js';
import type { Check, CheckStatus, DoctorReport, PathReport } from './types.js';
import { terminalText } from '../vocabulary/terminal-text.js';

// Paths, log lines and messages come from the machine examined: escaped, so that none of them
// can act on the terminal the report is printed on.
const t = (s: string) => terminalText(s);

const MARKS: Record<CheckStatus, string> = { pass: '✓', fail: '✗', warn: '!', info: '·' };
const COLOURS: Record<CheckStatus, string> = { pass: '32', fail: '31', warn: '33', info: '2' };
const TITLE_WIDTH = 20;

export interface RenderOptions {
  colour: boolean;
}

/** The text report `penstock doctor` prints for a {@link DoctorReport}; `colour` adds ANSI colours. */
export function render(report: DoctorReport, options: RenderOptions): string {
  const paint = (code: string, s: string) => (options.colour ? `\x1b[${code}m${s}\x1b[0m` : s);
  const bold = (s: string) => paint('1', s);
  const lines: string[] = [];
  const check = (c: Check) => lines.push(...checkLines(c, paint));
  lines.push(bold('penstock doctor') + (report.root !== '/' ? ` (recorded root ${t(report.root)})` : ''));
  lines.push('', bold('Platform'));
  report.platform.forEach(check);
  for (const p of report.paths) {
    lines.push('', bold(p.path === p.resolved ? t(p.path) : `${t(p.path)} (${t(p.resolved)})`));
    p.checks.filter((c) => c.id !== 'path.route').forEach(check);
    lines.push(...verdictBlock(p, paint));
  }
  lines.push('');
  return lines.join('\n');
}

type Paint = (code: string, s: string) => string;

/** A check as text: mark, title and summary, cuFile's quoted lines one per line, then the fix. */
function checkLines(c: Check, paint: Paint): string[] {
  const evidence = c.data?.evidence as { line: string; predicted?: boolean }[] | undefined;
  const summary = evidence ? `${evidence.length} line(s) that explain the outcome:` : t(c.summary);
  const out = [`  ${paint(COLOURS[c.status], MARKS[c.status])} ${c.title.padEnd(TITLE_WIDTH)}${summary}`];
  for (const e of evidence ?? [])
    out.push(`    ${' '.repeat(TITLE_WIDTH)}» ${t(e.line)}${e.predicted === true ? '  [predicted]' : e.predicted === false ? '  [NOT PREDICTED]' : ''}`);
  if (c.fix && c.status !== 'pass') out.push(`    ${' '.repeat(TITLE_WIDTH)}→ ${t(c.fix)}`);
  return out;
}

/** The text report of a parsed `gdscheck -p` report. */
export function renderGdscheck(report: GdscheckReport, options: RenderOptions): string {
  const paint = (code: string, s: string) => (options.colour ? `\x1b[${code}m${s}\x1b[0m` : s);
  const lines = [paint('1', `penstock doctor --gdscheck (${t(report.source)}, GDS ${t(report.parsed.gdsVersion ?? 'version unknown')})`), ''];
  for (const c of report.checks) lines.push(...checkLines(c, paint));
  lines.push('');
  return lines.join('\n');
}

function verdictBlock(p: PathReport, paint: Paint): string[] {
  const direct = p.verdict.startsWith('gds');
  const out = [`  ${paint(direct ? '32;1' : '33;1', 'Verdict:')} ${t(p.verdict)}`];
  const { blockers, warnings } = p.prediction;
  if (blockers.length > 1 || warnings.length) {
    for (const b of blockers) out.push(`    ${paint(COLOURS.fail, MARKS.fail)} ${t(b.message)}`);
    for (const w of warnings) out.push(`    ${paint(COLOURS.warn, MARKS.warn)} ${t(w.message)}`);
  }
  return out;
}
