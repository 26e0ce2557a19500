/**
 * Line charts as standalone SVG, written by hand so that reports need no plotting dependency.
 * Several panels stack vertically in one file; each has its own axes and legend.
 */

export interface Point {
  x: number;
  y: number;
}

export interface Series {
  name: string;
  points: Point[];
  /** Drawn dashed: used for baselines, so the eye finds penstock's own lines first. */
  dashed?: boolean;
}

export interface Panel {
  title: string;
  xLabel: string;
  yLabel: string;
  xLog?: boolean;
  yLog?: boolean;
  series: Series[];
  formatX?: (x: number) => string;
  formatY?: (y: number) => string;
}

export interface ChartOptions {
  title?: string;
  width?: number;
  panelHeight?: number;
}

const PALETTE = ['#1f6fb4', '#e4572e', '#2e933c', '#8e44ad', '#d4a017', '#17becf', '#7f7f7f', '#c2185b', '#5d4037', '#00897b'];

export function escapeXml(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;').replace(/'/g, '&apos;');
}

function num(v: number): string {
  return Number.isInteger(v) ? String(v) : v.toFixed(1);
}

interface Scale {
  map(v: number): number;
  ticks: number[];
}

/** 1-2-5 steps per decade over short ranges, decades alone over long ones. */
function logTicks(lo: number, hi: number): number[] {
  const ticks: number[] = [];
  const steps = Math.log10(hi) - Math.log10(lo) <= 3 ? [1, 2, 5] : [1];
  for (let e = Math.floor(Math.log10(lo)) - 1; e <= Math.ceil(Math.log10(hi)) + 1; e++)
    for (const m of steps) ticks.push(Number((m * 10 ** e).toPrecision(6)));
  // Widen the range to the ticks around the data, so the top and bottom carry labels.
  const below = ticks.filter((t) => t <= lo * 1.0001).pop() ?? lo;
  const above = ticks.find((t) => t >= hi * 0.9999) ?? hi;
  return ticks.filter((t) => t >= below && t <= above);
}

function linearStep(span: number): number {
  const raw = (span || 1) / 5;
  const mag = 10 ** Math.floor(Math.log10(raw));
  return [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw) ?? raw;
}

function scale(values: number[], log: boolean, from: number, to: number, dataTicks: boolean): Scale {
  let lo = Math.min(...values);
  let hi = Math.max(...values);
  let ticks: number[];
  if (dataTicks) {
    ticks = [...new Set(values)].sort((a, b) => a - b);
    if (lo === hi) [lo, hi] = log ? [lo / 2, hi * 2] : [lo - 1, hi + 1];
  } else if (log) {
    ticks = logTicks(lo, hi);
    lo = Math.min(lo, ticks[0] ?? lo);
    hi = Math.max(hi, ticks[ticks.length - 1] ?? hi);
    if (lo === hi) [lo, hi] = [lo / 2, hi * 2];
  } else {
    lo = Math.min(0, lo);
    const step = linearStep(hi - lo);
    hi = Math.max(Math.ceil(hi / step) * step, lo + step);
    ticks = [];
    for (let t = lo; t <= hi + step * 1e-9; t += step) ticks.push(Number(t.toPrecision(12)));
  }
  if (log) {
    const l0 = Math.log(lo);
    const l1 = Math.log(hi);
    return { map: (v) => from + ((Math.log(v) - l0) / (l1 - l0)) * (to - from), ticks };
  }
  return { map: (v) => from + ((v - lo) / (hi - lo)) * (to - from), ticks };
}

function defaultFormat(v: number): string {
  if (v >= 100 || Number.isInteger(v)) return String(Math.round(v * 100) / 100);
  return v.toPrecision(2);
}

function renderPanel(p: Panel, top: number, width: number, height: number): string {
  const out: string[] = [];
  const legendW = 330;
  const left = 70;
  const right = width - legendW - 20;
  const plotTop = top + 34;
  const bottom = top + height - 50;
  out.push(`<text x="${left}" y="${top + 20}" class="title">${escapeXml(p.title)}</text>`);
  const usable = (pt: Point) => Number.isFinite(pt.x) && Number.isFinite(pt.y) && (!p.xLog || pt.x > 0) && (!p.yLog || pt.y > 0);
  const series = p.series.map((s) => ({ ...s, points: s.points.filter(usable).sort((a, b) => a.x - b.x) }));
  const all = series.flatMap((s) => s.points);
  if (all.length === 0) {
    out.push(`<text x="${(left + right) / 2}" y="${(plotTop + bottom) / 2}" text-anchor="middle" class="note">no data</text>`);
    return out.join('\n');
  }
  const fx = p.formatX ?? defaultFormat;
  const fy = p.formatY ?? defaultFormat;
  const xs = scale(all.map((pt) => pt.x), Boolean(p.xLog), left, right, true);
  const ys = scale(all.map((pt) => pt.y), Boolean(p.yLog), bottom, plotTop, false);
  out.push(`<rect x="${left}" y="${plotTop}" width="${right - left}" height="${bottom - plotTop}" class="frame"/>`);
  for (const t of ys.ticks) {
    const y = num(ys.map(t));
    out.push(`<line x1="${left}" y1="${y}" x2="${right}" y2="${y}" class="grid"/>`);
    out.push(`<text x="${left - 6}" y="${y}" text-anchor="end" dominant-baseline="middle" class="tick">${escapeXml(fy(t))}</text>`);
  }
  for (const t of xs.ticks) {
    const x = num(xs.map(t));
    out.push(`<line x1="${x}" y1="${bottom}" x2="${x}" y2="${bottom + 4}" class="axis"/>`);
    out.push(`<text x="${x}" y="${bottom + 16}" text-anchor="middle" class="tick">${escapeXml(fx(t))}</text>`);
  }
  out.push(`<text x="${(left + right) / 2}" y="${bottom + 36}" text-anchor="middle" class="label">${escapeXml(p.xLabel)}</text>`);
  const midY = (plotTop + bottom) / 2;
  out.push(`<text x="18" y="${midY}" text-anchor="middle" transform="rotate(-90 18 ${midY})" class="label">${escapeXml(p.yLabel)}</text>`);
  series.forEach((s, i) => {
    const color = PALETTE[i % PALETTE.length]!;
    const dash = s.dashed ? ' stroke-dasharray="6 4"' : '';
    if (s.points.length > 1) {
      const d = s.points.map((pt, j) => `${j ? 'L' : 'M'}${num(xs.map(pt.x))} ${num(ys.map(pt.y))}`).join(' ');
      out.push(`<path d="${d}" fill="none" stroke="${color}" stroke-width="2"${dash}/>`);
    }
    for (const pt of s.points) out.push(`<circle cx="${num(xs.map(pt.x))}" cy="${num(ys.map(pt.y))}" r="3" fill="${color}"/>`);
    const ly = plotTop + 8 + i * 18;
    out.push(`<line x1="${right + 16}" y1="${ly}" x2="${right + 40}" y2="${ly}" stroke="${color}" stroke-width="2"${dash}/>`);
    out.push(`<text x="${right + 46}" y="${ly}" dominant-baseline="middle" class="legend">${escapeXml(s.name)}</text>`);
  });
  return out.join('\n');
}

/** A complete SVG document holding the panels one above the other. */
export function renderChart(panels: readonly Panel[], o: ChartOptions = {}): string {
  const width = o.width ?? 1100;
  const panelHeight = o.panelHeight ?? 380;
  const head = o.title ? 36 : 0;
  const height = head + panels.length * panelHeight + 10;
  const parts = [
    `<?xml version="1.0" encoding="UTF-8"?>`,
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif">`,
    `<style>.title{font-size:15px;font-weight:bold}.tick{font-size:11px;fill:#444}.label{font-size:12px}.legend{font-size:12px}` +
      `.note{font-size:13px;fill:#888}.grid{stroke:#e4e4e4}.axis{stroke:#444}.frame{fill:none;stroke:#888}</style>`,
    `<rect width="100%" height="100%" fill="#fff"/>`,
  ];
  if (o.title) parts.push(`<text x="${width / 2}" y="24" text-anchor="middle" class="title">${escapeXml(o.title)}</text>`);
  panels.forEach((p, i) => parts.push(renderPanel(p, head + i * panelHeight, width, panelHeight)));
  parts.push('</svg>');
  return parts.join('\n') + '\n';
}
