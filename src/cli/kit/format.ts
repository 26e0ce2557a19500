/** Number formatting and plain-text / Markdown tables for benchmark reports. */
import { formatSize } from '../../settings/config.js';

export { formatSize };

/** Three significant figures at most, never scientific notation for the sizes seen here. */
export function formatGBps(v: number | undefined): string {
  if (v === undefined || !Number.isFinite(v)) return '—';
  if (v >= 100) return v.toFixed(0);
  if (v >= 10) return v.toFixed(1);
  if (v >= 0.1) return v.toFixed(2);
  return v.toPrecision(2);
}

export function formatSeconds(v: number | undefined): string {
  if (v === undefined || !Number.isFinite(v)) return '—';
  if (v >= 10) return `${v.toFixed(1)} s`;
  if (v >= 1) return `${v.toFixed(2)} s`;
  if (v >= 1e-3) return `${(v * 1e3).toFixed(1)} ms`;
  return `${(v * 1e6).toFixed(1)} µs`;
}

export function formatMicros(us: number | undefined): string {
  if (us === undefined || !Number.isFinite(us)) return '—';
  return us >= 1000 ? `${(us / 1000).toFixed(2)} ms` : `${us.toFixed(1)} µs`;
}

export function formatCpu(v: number | undefined): string {
  if (v === undefined || !Number.isFinite(v)) return '—';
  return v >= 1 ? v.toFixed(2) : v.toFixed(3);
}

export function formatMiB(bytes: number | undefined): string {
  if (bytes === undefined || !Number.isFinite(bytes)) return '—';
  return `${(bytes / 2 ** 20).toFixed(1)} MiB`;
}

export function formatRatio(v: number | undefined): string {
  if (v === undefined || !Number.isFinite(v)) return '—';
  return v >= 10 ? `${v.toFixed(0)}×` : `${v.toFixed(2)}×`;
}

export type Align = 'left' | 'right';

/**
 * Columns padded to their widest cell. Text is measured in code points, which is right for the
 * characters these tables hold (digits, µ, ×, —).
 */
export function textTable(headers: readonly string[], rows: readonly (readonly string[])[], align: readonly Align[] = []): string {
  const len = (s: string) => [...s].length;
  const widths = headers.map((h, i) => Math.max(len(h), ...rows.map((r) => len(r[i] ?? ''))));
  const pad = (s: string, i: number) => {
    const fill = ' '.repeat(Math.max(0, widths[i]! - len(s)));
    return (align[i] ?? 'left') === 'right' ? fill + s : s + fill;
  };
  const line = (cells: readonly string[]) => headers.map((_, i) => pad(cells[i] ?? '', i)).join('  ').trimEnd();
  const rule = widths.map((w) => '-'.repeat(w)).join('  ');
  return [line(headers), rule, ...rows.map(line)].join('\n') + '\n';
}

function mdCell(s: string): string {
  return s.replace(/\\/g, '\\\\').replace(/\|/g, '\\|').replace(/\r?\n/g, ' ');
}

export function markdownTable(headers: readonly string[], rows: readonly (readonly string[])[], align: readonly Align[] = []): string {
  const head = `| ${headers.map(mdCell).join(' | ')} |`;
  const rule = `| ${headers.map((_, i) => ((align[i] ?? 'left') === 'right' ? '---:' : '---')).join(' | ')} |`;
  const body = rows.map((r) => `| ${headers.map((_, i) => mdCell(r[i] ?? '')).join(' | ')} |`);
  return [head, rule, ...body].join('\n') + '\n';
}
