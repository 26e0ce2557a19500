/** The suite's outputs: limits beside each row, the target checks, Markdown tables and the chart. */
import { formatCpu, formatGBps, formatMicros, formatMiB, formatRatio, formatSize, markdownTable, textTable } from '../src/cli/kit/format.js';
import { renderChart, type Panel, type Series } from './svg.js';
import { median } from '../src/cli/bench/stats.js';
import type { Row, SuiteReport, TargetRow } from './context.js';
import { sizeTargets } from './size-targets.js';

const GiB = 1024 ** 3;

function limit(r: SuiteReport, name: string): number | undefined {
  const l = r.limits.find((x) => x.name === name && x.gbps !== undefined);
  return l?.gbps;
}

/** Each row's bound: the disk for cold reads, the page cache (and the bus, into a GPU) for warm ones. */
export function annotateLimits(r: SuiteReport): void {
  const disk = limit(r, 'disk-direct');
  const cache = limit(r, 'page-cache');
  const bus = limit(r, 'pinned-to-gpu');
  for (const row of r.results) {
    delete row.limit;
    // Small transfers are bound by per-call latency (and often served from CPU caches), not bandwidth.
    if (row.medianGBps === undefined || row.op !== 'read' || row.size < 64 * 1024 * 1024) continue;
    let name: string | undefined;
    let gbps: number | undefined;
    if (row.state === 'cold') [name, gbps] = ['disk (dd O_DIRECT)', disk];
    else if (row.target === 'host') [name, gbps] = ['page cache (16 threads)', cache];
    else if (cache !== undefined && bus !== undefined) [name, gbps] = cache < bus ? ['page cache (16 threads)', cache] : ['pinned → GPU copy', bus];
    if (name && gbps) row.limit = { name, gbps, fraction: row.medianGBps / gbps };
  }
}

function find(r: SuiteReport, section: string, methodId: string, size: number, state: 'warm' | 'cold' = 'warm'): Row | undefined {
  return r.results.find((x) => x.section === section && x.methodId === methodId && x.size === size && x.state === state && !x.error);
}

function atLeast(name: string, want: number, unit: string, value: number | undefined, size: number | undefined, why: string, wantSize = GiB): TargetRow {
  const wantText = `≥ ${unit === '×' ? `${want}×` : `${want} ${unit}`}`;
  if (value === undefined || !Number.isFinite(value)) return { name, want: wantText, measured: '—', status: 'not measured', note: why };
  const measured = unit === '×' ? formatRatio(value) : `${formatGBps(value)} ${unit}`;
  if (size !== undefined && size !== wantSize) return { name, want: wantText, measured, status: 'not comparable', note: `measured at ${formatSize(size)}` };
  return { name, want: wantText, measured, status: value >= want ? 'pass' : 'miss' };
}

export function computeTargets(r: SuiteReport, sweepSize: number): TargetRow[] {
  const gpu = r.machine.gpu ? '' : 'no GPU';
  const t: TargetRow[] = [];
  const dev = find(r, 'device-read', 'penstock-device-read', sweepSize);
  t.push(atLeast('warm 1 GiB → GPU, default settings', 43, 'GB/s', dev?.medianGBps, sweepSize, gpu || 'no result'));
  const fr = r.firstRead as { target?: string; size?: number; medianGBps?: number } | undefined;
  t.push(atLeast('first read in a fresh process, 1 GiB → GPU', 30, 'GB/s', fr?.target === 'device' ? fr.medianGBps : undefined, fr?.size, gpu || 'no result'));
  const cold = find(r, 'cold', 'penstock-device-read', sweepSize, 'cold');
  const disk = r.limits.find((l) => l.name === 'disk-direct' && l.gbps !== undefined);
  t.push(atLeast('cold 1 GiB → GPU vs dd O_DIRECT', 0.95, '×', cold ? coldRatio(cold, disk?.gbps) : undefined, sweepSize, gpu || 'no cold result or no dd rate'));
  const naive = find(r, 'device-read', 'readfile-copyfrom', sweepSize);
  t.push(atLeast('warm 1 GiB → GPU vs fs.readFile → copyFrom', 25, '×', dev && naive ? dev.medianGBps! / naive.medianGBps! : undefined, sweepSize, gpu || 'no result'));
  const host = find(r, 'host-read', 'penstock-host-read', sweepSize);
  t.push(atLeast('host read warm 1 GiB, default settings', 45, 'GB/s', host?.medianGBps, sweepSize, 'no result'));
  const fh = find(r, 'host-read', 'filehandle-concurrent', sweepSize);
  t.push(atLeast('host read warm 1 GiB vs 16 × FileHandle.read', 1, '×', host && fh ? host.medianGBps! / fh.medianGBps! : undefined, sweepSize, 'no result'));
  const mem = r.memory as { size?: number; peakAboveBaseline?: number } | undefined;
  const memRow: TargetRow = { name: '4 GiB → GPU, peak RSS above baseline', want: '≤ 512 MiB', measured: formatMiB(mem?.peakAboveBaseline), status: 'not measured' };
  if (mem?.peakAboveBaseline === undefined) memRow.note = gpu || 'no result';
  else if (mem.size !== 4 * GiB) Object.assign(memRow, { status: 'not comparable', note: `measured at ${formatSize(mem.size ?? 0)}` });
  else memRow.status = mem.peakAboveBaseline <= 512 * 1024 * 1024 ? 'pass' : 'miss';
  t.push(memRow);
  const wd = find(r, 'write', 'penstock-device-write', sweepSize);
  const wh = find(r, 'write', 'penstock-host-write', sweepSize);
  t.push(atLeast('GPU → file vs host → file writes, 1 GiB', 0.9, '×', wd && wh ? wd.medianGBps! / wh.medianGBps! : undefined, sweepSize, gpu || 'no result'));
  t.push(...sizeTargets(r));
  return t;
}

/**
 * A cold row against the disk: the median of each repeat's rate over the dd rate measured just
 * before it, where the row has those; otherwise against the run's median dd rate.
 */
function coldRatio(row: Row, diskGBps: number | undefined): number | undefined {
  const s = row.samples ?? [];
  const d = row.pairedDiskGBps ?? [];
  if (s.length > 0 && d.length === s.length) return median(s.map((x, i) => x.bytes / x.seconds / 1e9 / d[i]!));
  return diskGBps && row.medianGBps !== undefined ? row.medianGBps / diskGBps : undefined;
}

export function targetsText(rows: TargetRow[]): string {
  return textTable(['target', 'wanted', 'measured', 'result', 'note'], rows.map((x) => [x.name, x.want, x.measured, x.status, x.note ?? '']));
}

const SECTIONS: [string, string][] = [
  ['device-read', 'Reads into GPU memory, warm'],
  ['host-read', 'Reads into host memory, warm'],
  ['threads', 'Threads (or concurrent fs calls), warm'],
  ['task-size', 'Task size, warm'],
  ['split', 'Task size at mid sizes, warm (the task floor is chosen from these)'],
  ['batch', 'Batched random 4 KiB reads, 10 000 per batch, warm (GB/s; ranges/s = GB/s × 1e9 / 4096)'],
  ['write', 'Writes (page cache; fsync after each repeat, untimed)'],
  ['cold', 'Cold reads (pages dropped before each repeat)'],
];

function rowCells(x: Row): string[] {
  if (x.error) return [formatSize(x.size), x.target, x.method, x.threads ? String(x.threads) : '', x.taskSize ? formatSize(x.taskSize) : '', 'failed', '', '', '', '', x.error];
  const lim = x.limit ? `${(x.limit.fraction * 100).toFixed(0)}% of ${x.limit.name}` : '';
  return [
    formatSize(x.size), x.target, x.method, x.threads ? String(x.threads) : '', x.taskSize ? formatSize(x.taskSize) : '',
    formatGBps(x.medianGBps), formatGBps(x.minGBps), formatGBps(x.maxGBps), formatCpu(x.cpuSecondsPerGB), lim, x.path,
  ];
}

export function renderMarkdown(r: SuiteReport): string {
  const m = r.machine;
  const parts: string[] = [
    `# penstock benchmark results\n`,
    `Run ${r.started}${r.durationSeconds !== undefined ? `, ${r.durationSeconds.toFixed(0)} s` : ' (in progress)'}. ` +
      `${m.cpus} CPUs (${m.cpuModel}), ${(m.memoryBytes / 1024 ** 3).toFixed(1)} GiB RAM, Node ${m.node}, kernel ${m.kernel}, ` +
      `UV_THREADPOOL_SIZE=${m.uvThreadpoolSize}. GPU: ${m.gpu ? JSON.stringify(m.gpu) : `none (${m.gpuSkipReason})`}. ` +
      `Files on ${m.fileSystem} in ${m.dir}. GB = 1e9 bytes; medians of ${r.options.repeat} repeats.\n`,
  ];
  if (r.coldMethod) parts.push(`Cold: ${r.coldMethod}.\n`);
  if (r.targets.length) parts.push(`## Targets\n`, markdownTable(['target', 'wanted', 'measured', 'result', 'note'], r.targets.map((x) => [x.name, x.want, x.measured, x.status, x.note ?? ''])));
  parts.push(
    `## The machine's limits, measured in the same run\n`,
    markdownTable(['limit', 'what', 'size', 'GB/s', 'min', 'max', 'path'], r.limits.map((l) => [
      l.name, l.what, l.size ? formatSize(l.size) : '', l.error ? `failed: ${l.error}` : formatGBps(l.gbps), formatGBps(l.minGBps), formatGBps(l.maxGBps), l.path,
    ]), ['left', 'left', 'right', 'right', 'right', 'right', 'left']),
  );
  const head = ['size', 'target', 'method', 'threads', 'task', 'GB/s', 'min', 'max', 'CPU s/GB', 'of limit', 'path'];
  const align = ['right', 'left', 'left', 'right', 'right', 'right', 'right', 'right', 'right', 'right', 'left'] as const;
  for (const [key, title] of SECTIONS) {
    const rows = r.results.filter((x) => x.section === key);
    if (rows.length) parts.push(`## ${title}\n`, markdownTable(head, rows.map(rowCells), align));
  }
  if (r.latency.length)
    parts.push(`## Small-read latency (one at a time, random offsets in a warm file)\n`, markdownTable(
      ['target', 'size', 'method', 'iterations', 'p50', 'p99', 'mean', 'path'],
      r.latency.map((l) => [l.target, formatSize(l.size), l.method, String(l.iterations), formatMicros(l.p50Us), formatMicros(l.p99Us), formatMicros(l.meanUs), l.path]),
    ));
  const fr = r.firstRead as Record<string, unknown> | undefined;
  if (fr) parts.push(`## First read in a fresh process\n`, fr.error ? `Failed: ${String(fr.error)}\n` :
    `${formatSize(Number(fr.size))} → ${String(fr.target)}: median ${formatGBps(Number(fr.medianGBps))} GB/s (min ${formatGBps(Number(fr.minGBps))}, max ${formatGBps(Number(fr.maxGBps))}) over ${r.options.repeat} processes; allocation and open before it took ${Number(fr.setupSeconds).toFixed(3)} s; ${String(fr.path)}.\n`);
  const mem = r.memory as Record<string, number | string | undefined> | undefined;
  if (mem) parts.push(`## Memory during one large read into the GPU (fresh process)\n`, mem.error ? `Failed: ${String(mem.error)}\n` :
    `${formatSize(Number(mem.size))}: peak RSS ${formatMiB(Number(mem.peakAboveBaseline))} above the baseline of ${formatMiB(Number(mem.baselineRss))} ` +
    `(sampled every 2 ms: ${formatMiB(Number(mem.peakRssSampled))}; VmHWM ${formatMiB(Number(mem.vmHwm))}${mem.vmHwmReset ? ', reset before the read' : ', not resettable: lifetime peak'}); ` +
    `pinned bytes ${formatMiB(Number(mem.pinnedBefore))} before, ${formatMiB(Number(mem.pinnedPeak))} at peak, ${formatMiB(Number(mem.pinnedAfter))} after; ${formatGBps(Number(mem.gbps))} GB/s.\n`);
  if (r.skipped.length) parts.push(`## Skipped\n`, ...r.skipped.map((s) => `- ${s.what}: ${s.reason}\n`));
  if (r.notes.length) parts.push(`## Notes\n`, ...r.notes.map((n) => `- ${n}\n`));
  return parts.join('\n');
}

function seriesBy(rows: Row[], x: (r: Row) => number, label: (r: Row) => string): Series[] {
  const map = new Map<string, Series>();
  for (const r of rows) {
    if (r.error || r.medianGBps === undefined) continue;
    const name = label(r);
    let s = map.get(name);
    if (!s) map.set(name, (s = { name, points: [], dashed: r.methodId.startsWith('penstock') ? false : true }));
    s.points.push({ x: x(r), y: r.medianGBps });
  }
  return [...map.values()];
}

export function renderSvg(r: SuiteReport): string {
  const who = (x: Row) => `${x.target === 'device' ? 'GPU' : 'host'}: ${x.method}`;
  const bySize = (section: string[]) => r.results.filter((x) => section.includes(x.section));
  const fy = (v: number) => (v >= 1 ? String(v) : v.toPrecision(1));
  const panels: Panel[] = [
    { title: 'Reads, warm: throughput against size', xLabel: 'transfer size', yLabel: 'GB/s', xLog: true, yLog: true, formatX: formatSize, formatY: fy,
      series: seriesBy(bySize(['device-read', 'host-read']), (x) => x.size, who) },
    { title: 'Reads, warm: throughput against threads (concurrent calls for FileHandle.read)', xLabel: 'threads', yLabel: 'GB/s', xLog: true, formatY: fy,
      series: seriesBy(bySize(['threads']), (x) => x.threads ?? 0, (x) => (x.methodId === 'filehandle-concurrent' ? 'host: N × FileHandle.read (4 MiB)' : who(x))) },
    { title: 'Writes (page cache): throughput against size', xLabel: 'transfer size', yLabel: 'GB/s', xLog: true, yLog: true, formatX: formatSize, formatY: fy,
      series: seriesBy(bySize(['write']), (x) => x.size, who) },
    { title: 'Cold reads: throughput against size', xLabel: 'transfer size', yLabel: 'GB/s', xLog: true, yLog: true, formatX: formatSize, formatY: fy,
      series: seriesBy(bySize(['cold']), (x) => x.size, who) },
  ].filter((p) => p.series.length > 0);
  const gpuName = (r.machine.gpu as { name?: string } | null)?.name;
  return renderChart(panels, { title: `penstock throughput (${r.started.slice(0, 10)}, ${r.machine.cpus} CPUs, ${gpuName ?? 'no GPU'})` });
}
