/**
 * The pure parts of `bench:tensors`: which loaders run in which state, what each one's clocks
 * include, the line a child prints when its tensors are ready, and how runs become rows of a
 * table. No I/O here, so that the rendering and the bookkeeping are tested without a GPU.
 */
import { median } from '../src/cli/bench/stats.js';
import { READY_TAG, type ReadyReport } from './ready-line.js';

/** Where the checkpoint lies: the file system of `--dir`, or tmpfs. */
export type FsId = 'disk' | 'tmpfs';
/** Pages cached (warm) or dropped and checked absent (cold). */
export type StateId = 'warm' | 'cold';
/** The two checkpoint layouts. */
export type CheckpointId = '7B' | 'MoE';
export type MethodId =
  | 'penstock-cli'
  | 'penstock-cli-compat'
  | 'penstock-lib'
  | 'penstock-prepared'
  | 'load_file'
  | 'fastsafetensors'
  | 'instanttensor'
  | 'dd-direct'
  | 'dd-buffered';

export interface MethodSpec {
  id: MethodId;
  /** What the row is, in words. */
  label: string;
  states: readonly StateId[];
  fs: readonly FsId[];
  /** What the parent's "start → ready" clock includes; undefined where the row has no such clock. */
  wall?: string;
  /** What the loader's own clock includes. */
  loader: string;
}

const NODE_WALL = 'node start, penstock import, CUDA driver and context, penstock preparation, headers, data';
const PY_WALL = 'python start, import torch (and the loader), torch CUDA context, the load';

export const METHODS: readonly MethodSpec[] = [
  { id: 'penstock-cli', label: '`penstock load --device 0`, fresh process, defaults', states: ['warm', 'cold'], fs: ['disk', 'tmpfs'], wall: NODE_WALL, loader: 'loadTensors in the CLI: CUDA context, penstock preparation, headers, data (not node start or import)' },
  { id: 'penstock-cli-compat', label: '`penstock load --device 0`, fresh process, PENSTOCK_COMPAT_MODE=on', states: ['warm', 'cold'], fs: ['disk', 'tmpfs'], wall: NODE_WALL, loader: 'loadTensors in the CLI: CUDA context, penstock preparation, headers, data (not node start or import)' },
  { id: 'penstock-lib', label: 'loadTensors, fresh child, CUDA context made first', states: ['warm', 'cold'], fs: ['disk', 'tmpfs'], wall: NODE_WALL, loader: 'loadTensors after the CUDA context exists (as the Python peers time): penstock preparation, headers, data' },
  { id: 'penstock-prepared', label: 'penstock, prepared process, repeat load (secondary)', states: ['warm'], fs: ['disk', 'tmpfs'], loader: 'loadTensors in a process that already has its context, its preparation and one load of the same file behind it' },
  { id: 'load_file', label: 'safetensors `load_file(device="cuda:0")`, fresh python', states: ['warm', 'cold'], fs: ['disk', 'tmpfs'], wall: PY_WALL, loader: 'after import and torch CUDA context: header, reads, copies' },
  { id: 'fastsafetensors', label: 'fastsafetensors nogds (16 threads, 16 MiB bounce, block per thread), fresh python', states: ['warm', 'cold'], fs: ['disk', 'tmpfs'], wall: PY_WALL, loader: 'after torch CUDA context and import: its set-up (pinned bounce buffers, threads), reads, copies, get_tensor' },
  { id: 'instanttensor', label: 'InstantTensor (libaio O_DIRECT; in-memory path on tmpfs), fresh python', states: ['warm', 'cold'], fs: ['disk', 'tmpfs'], wall: PY_WALL, loader: 'after torch CUDA context, import and its init(): safe_open, reads, clone() per tensor' },
  { id: 'dd-direct', label: '`dd iflag=direct bs=16M` to /dev/null', states: ['cold'], fs: ['disk'], wall: 'process start to exit', loader: "dd's own clock" },
  { id: 'dd-buffered', label: '`dd bs=16M` (buffered) to /dev/null', states: ['cold'], fs: ['disk'], wall: 'process start to exit', loader: "dd's own clock" },
];

export const CHECKPOINTS: readonly CheckpointId[] = ['7B', 'MoE'];
export const FILE_SYSTEMS: readonly FsId[] = ['disk', 'tmpfs'];
export const STATES: readonly StateId[] = ['warm', 'cold'];

/** The method's spec (throws on an unknown id). */
export function methodSpec(id: string): MethodSpec {
  const m = METHODS.find((x) => x.id === id);
  if (!m) throw new Error(`unknown method '${id}' (known: ${METHODS.map((x) => x.id).join(', ')})`);
  return m;
}

/** A group of runs that share the file and its cache state; runs inside a group are interleaved. */
export interface Group {
  checkpoint: CheckpointId;
  fs: FsId;
  state: StateId;
  methods: MethodId[];
}

/** Group order: the most wanted first, so a time budget cuts the least wanted. */
const GROUP_ORDER: readonly [CheckpointId, FsId, StateId][] = [
  ['7B', 'disk', 'warm'],
  ['7B', 'disk', 'cold'],
  ['MoE', 'disk', 'warm'],
  ['7B', 'tmpfs', 'warm'],
  ['MoE', 'tmpfs', 'warm'],
  ['MoE', 'disk', 'cold'],
];

/**
 * `--only`: comma-separated tokens, each a method, a checkpoint (7B, MoE), a file system (disk,
 * tmpfs) or a state (warm, cold). Tokens of one kind are alternatives; kinds combine.
 */
export interface Selection {
  methods?: MethodId[];
  checkpoints?: CheckpointId[];
  fs?: FsId[];
  states?: StateId[];
}

export function parseOnly(text: string | undefined): Selection {
  const sel: Selection = {};
  if (!text) return sel;
  for (const raw of text.split(',').map((s) => s.trim()).filter(Boolean)) {
    const t = raw === 'ext4' ? 'disk' : raw === '7B-shaped' ? '7B' : raw === 'MoE-shaped' ? 'MoE' : raw;
    if ((CHECKPOINTS as readonly string[]).includes(t)) (sel.checkpoints ??= []).push(t as CheckpointId);
    else if ((FILE_SYSTEMS as readonly string[]).includes(t)) (sel.fs ??= []).push(t as FsId);
    else if ((STATES as readonly string[]).includes(t)) (sel.states ??= []).push(t as StateId);
    else if (t === 'penstock' || t === 'peers' || t === 'dd') (sel.methods ??= []).push(...METHODS.filter((m) => (t === 'dd' ? m.id.startsWith('dd-') : t === 'penstock' ? m.id.startsWith('penstock') : ['load_file', 'fastsafetensors', 'instanttensor'].includes(m.id))).map((m) => m.id));
    else (sel.methods ??= []).push(methodSpec(t).id);
  }
  return sel;
}

/** The groups to run, in order, with the methods each one holds. */
export function plannedGroups(sel: Selection): Group[] {
  const out: Group[] = [];
  for (const [checkpoint, fs, state] of GROUP_ORDER) {
    if (sel.checkpoints && !sel.checkpoints.includes(checkpoint)) continue;
    if (sel.fs && !sel.fs.includes(fs)) continue;
    if (sel.states && !sel.states.includes(state)) continue;
    const methods = METHODS.filter((m) => m.states.includes(state) && m.fs.includes(fs) && (!sel.methods || sel.methods.includes(m.id))).map((m) => m.id);
    if (methods.length) out.push({ checkpoint, fs, state, methods });
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// The ready line: a child writes it to file descriptor 3 when its tensors are in GPU memory.

export { READY_TAG, formatReadyLine, type ReadyReport } from './ready-line.js';

/** Ready reports in `text` (lines of other kinds are ignored; a torn last line is left out). */
export function parseReadyLines(text: string): ReadyReport[] {
  const out: ReadyReport[] = [];
  for (const line of text.split('\n')) {
    if (!line.startsWith(READY_TAG + ' ')) continue;
    try {
      const v = JSON.parse(line.slice(READY_TAG.length + 1));
      if (v && typeof v === 'object') out.push(v as ReadyReport);
    } catch {
      // An incomplete line (the child died while writing it): not a report.
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Runs and rows

/** One timed run, as a line of runs.jsonl. */
export interface RunRecord {
  type: 'run';
  checkpoint: CheckpointId;
  fs: FsId;
  state: StateId;
  method: MethodId;
  rep: number;
  ok: boolean;
  error?: string;
  /** Parent's clock: spawn to the ready line. */
  wallReadyS?: number;
  /** Parent's clock: spawn to exit. */
  wallExitS?: number;
  childReadyS?: number;
  loaderS?: number;
  contextAtS?: number;
  /** Tensor bytes loaded. */
  bytes: number;
  /** Fraction of the file's pages in the page cache just before the run (mincore). */
  residentBefore?: number;
  drop?: string;
  /** Tensors compared with the file's sha256, and how many differed or were missing. */
  check?: { compared: number; mismatched: number; missing: number; how: string };
  route?: string;
  note?: string;
  /** A check run whose times are not the row's (it only adds its check). */
  untimed?: boolean;
  /** Not run (a peer that did not build, no tmpfs copy, pages that stayed): a later call tries again. */
  skipped?: boolean;
  at: string;
}

export const rowKey = (r: { checkpoint: string; fs: string; state: string; method: string }): string => `${r.checkpoint}|${r.fs}|${r.state}|${r.method}`;

export interface Stat {
  min: number;
  median: number;
  n: number;
}

export function stat(values: readonly (number | undefined)[]): Stat | undefined {
  const v = values.filter((x): x is number => typeof x === 'number' && Number.isFinite(x));
  return v.length ? { min: Math.min(...v), median: median(v), n: v.length } : undefined;
}

export interface Row {
  checkpoint: CheckpointId;
  fs: FsId;
  state: StateId;
  method: MethodId;
  runs: number;
  ok: number;
  bytes: number;
  wallReady?: Stat;
  wallExit?: Stat;
  childReady?: Stat;
  loader?: Stat;
  contextAt?: Stat;
  /** Tensor bytes over the loader's median, GB/s. */
  gbps?: number;
  check?: { compared: number; mismatched: number; missing: number; how: string[] };
  /** The largest resident fraction before a cold run, the smallest before a warm one. */
  resident?: number;
  drop?: string;
  route?: string;
  notes: string[];
  errors: string[];
}

/** Rows from runs, in the order rows first appear among the runs (the later record of a repeat wins). */
export function aggregate(records: readonly RunRecord[]): Row[] {
  const byRep = new Map<string, RunRecord>();
  for (const r of records) if (r.type === 'run') byRep.set(`${rowKey(r)}|${r.rep}`, r);
  const groups = new Map<string, RunRecord[]>();
  for (const r of byRep.values()) {
    const k = rowKey(r);
    if (!groups.has(k)) groups.set(k, []);
    groups.get(k)!.push(r);
  }
  const rows: Row[] = [];
  for (const runs of groups.values()) {
    const first = runs[0]!;
    const timed = runs.filter((r) => !r.untimed);
    const good = timed.filter((r) => r.ok);
    const row: Row = { checkpoint: first.checkpoint, fs: first.fs, state: first.state, method: first.method, runs: timed.length, ok: good.length, bytes: (timed[0] ?? first).bytes, notes: [], errors: [] };
    const set = <K extends 'wallReady' | 'wallExit' | 'childReady' | 'loader' | 'contextAt'>(k: K, s: Stat | undefined) => {
      if (s) row[k] = s;
    };
    set('wallReady', stat(good.map((r) => r.wallReadyS)));
    set('wallExit', stat(good.map((r) => r.wallExitS)));
    set('childReady', stat(good.map((r) => r.childReadyS)));
    set('loader', stat(good.map((r) => r.loaderS)));
    set('contextAt', stat(good.map((r) => r.contextAtS)));
    if (row.loader && row.loader.median > 0) row.gbps = row.bytes / row.loader.median / 1e9;
    for (const r of runs) {
      if (r.check) {
        row.check ??= { compared: 0, mismatched: 0, missing: 0, how: [] };
        row.check.compared += r.check.compared;
        row.check.mismatched += r.check.mismatched;
        row.check.missing += r.check.missing;
        if (!row.check.how.includes(r.check.how)) row.check.how.push(r.check.how);
      }
      const e = r.error && (r.untimed ? `check run: ${r.error}` : r.error);
      if (e && !row.errors.includes(e)) row.errors.push(e);
      if (r.note && !row.notes.includes(r.note)) row.notes.push(r.note);
      if (r.route && row.route === undefined) row.route = r.route;
      if (r.drop && row.drop === undefined) row.drop = r.drop;
      if (r.residentBefore !== undefined && r.residentBefore >= 0)
        row.resident = row.resident === undefined ? r.residentBefore : r.state === 'cold' ? Math.max(row.resident, r.residentBefore) : Math.min(row.resident, r.residentBefore);
    }
    rows.push(row);
  }
  return rows;
}

const s3 = (x: number) => x.toFixed(x < 10 ? 3 : 2);
const pair = (s: Stat | undefined) => (s ? (s.n > 1 ? `${s3(s.min)} / ${s3(s.median)}` : s3(s.median)) : '—');
const cell = (s: string) => s.replace(/\|/g, '\\|').replace(/\n/g, ' ');

/** One table cell on the tensors' check. */
export function checkCell(row: Row): string {
  const c = row.check;
  if (!c) return 'not checked';
  if (c.mismatched === 0 && c.missing === 0) return `${c.compared} equal (${c.how.join('; ')})`;
  return `**${c.mismatched} differ, ${c.missing} missing** of ${c.compared} (${c.how.join('; ')})`;
}

/** The row's notes: errors first, then cache state, route and remarks. */
export function notesCell(row: Row): string {
  const out: string[] = [];
  const runErrors = row.errors.filter((e) => !e.startsWith('check run: '));
  if (row.runs > row.ok) out.push(`${row.runs - row.ok} of ${row.runs} failed: ${runErrors.slice(0, 2).join('; ').slice(0, 300)}`);
  out.push(...row.errors.filter((e) => e.startsWith('check run: ')).map((e) => e.slice(0, 300)));
  if (row.resident !== undefined) out.push(`${row.state === 'cold' ? 'resident before, at most' : 'resident before, at least'} ${(row.resident * 100).toFixed(1)} %`);
  if (row.drop) out.push(row.drop);
  if (row.route) out.push(row.route);
  out.push(...row.notes);
  return out.join('; ');
}

const FS_LABEL: Record<FsId, string> = { disk: 'disk', tmpfs: 'tmpfs' };

/**
 * The Markdown table: one line per row, times in seconds (min / median of the runs that
 * succeeded), GB/s over the loader's median; a legend below says what each clock includes.
 */
export function renderMarkdown(rows: readonly Row[], opts: { diskFs?: string; checkpoints?: Partial<Record<CheckpointId, string>> } = {}): string {
  const head = ['checkpoint', 'on', 'state', 'method', 'runs', 'start → ready, wall (s)', 'child clock from start (s)', 'whole process (s)', 'CUDA context at (s)', 'loader (s)', 'GB/s (loader)', 'check', 'notes'];
  const lines = [`| ${head.join(' | ')} |`, `| ${head.map(() => '---').join(' | ')} |`];
  for (const r of rows) {
    const fs = r.fs === 'disk' && opts.diskFs ? opts.diskFs : FS_LABEL[r.fs];
    lines.push(
      `| ${[
        r.checkpoint, fs, r.state, r.method, `${r.ok}/${r.runs}`, pair(r.wallReady), pair(r.childReady), pair(r.wallExit), pair(r.contextAt), pair(r.loader),
        r.gbps !== undefined ? r.gbps.toFixed(2) : '—', checkCell(r), notesCell(r),
      ].map(cell).join(' | ')} |`,
    );
  }
  const legend = METHODS.filter((m) => rows.some((r) => r.method === m.id)).map(
    (m) => `- **${m.id}**: ${m.label}. Start → ready: ${m.wall ?? 'not measured (one process for all its loads)'}. Loader: ${m.loader}.`,
  );
  const cps = Object.entries(opts.checkpoints ?? {}).map(([k, v]) => `- **${k}**: ${v}`);
  return [
    lines.join('\n'),
    '',
    'Times are min / median over the runs that succeeded (one value: one run). "start → ready, wall" is the parent\'s clock from spawning the process to the child\'s ready line (tensors in GPU memory); "child clock" is the child\'s own, from its process start (Node: performance.timeOrigin; Python: /proc starttime, 10 ms steps); "whole process" is spawn to exit (hashing for the check, on the first run of a row, included); "CUDA context at" is when the context existed on the child\'s clock, where the loader\'s clock starts after it (penstock-lib and the Python rows). GB/s: tensor bytes (dd: file bytes) over the loader\'s median.',
    '',
    ...cps,
    ...legend,
    '',
  ].join('\n');
}
