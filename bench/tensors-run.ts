/**
 * One run of one method of `bench:tensors`, as a fresh process, turned into records: the command
 * line of each method, what its output says (its loader's clock, routes, the tensors' check), and
 * the untimed `penstock load --verify` check.
 */
import fs from 'node:fs';
import path from 'node:path';
import { parseDdOutput } from '../src/cli/bench/system.js';
import type { PeerKit } from './tensors-setup.js';
import { failure, runTimed, tail, type TimedRun } from './tensors-spawn.js';
import type { CheckpointId, FsId, MethodId, RunRecord, StateId } from './tensors-rows.js';

export interface RunContext {
  python: string;
  /** bench/tensors_peers.py */
  peersScript: string;
  /** dist/bench/tensors-child.js */
  childScript: string;
  /** dist/src/cli/main.js */
  cliScript: string;
  /** file: URL of dist/bench/ready-hook.js */
  hookUrl: string;
  runTimeoutS: number;
  /** Scratch for the kits' JSON. */
  scratch: string;
  kits: PeerKit[];
}

export interface RunTarget {
  checkpoint: CheckpointId;
  fs: FsId;
  state: StateId;
  file: string;
  reference: string;
  tensorBytes: number;
}

type Routes = Record<string, { ops: number; bytes: number }>;
const routeText = (routes: Routes | undefined, fallback?: string) =>
  [Object.entries(routes ?? {}).map(([k, v]) => `${k} ${v.ops} ops`).join(', '), fallback ? `not cuFile: ${fallback.slice(0, 120)}` : ''].filter(Boolean).join('; ');

function base(t: RunTarget, method: MethodId, rep: number, r: TimedRun | undefined): RunRecord {
  const rec: RunRecord = { type: 'run', checkpoint: t.checkpoint, fs: t.fs, state: t.state, method, rep, ok: false, bytes: t.tensorBytes, at: new Date().toISOString() };
  if (r) {
    rec.wallExitS = r.wallExitS;
    if (r.wallReadyS !== undefined) rec.wallReadyS = r.wallReadyS;
    if (typeof r.ready?.sinceStartS === 'number') rec.childReadyS = r.ready.sinceStartS;
    if (typeof r.ready?.contextAtS === 'number') rec.contextAtS = r.ready.contextAtS;
    if (typeof r.ready?.loaderS === 'number') rec.loaderS = r.ready.loaderS;
  }
  return rec;
}

function lastJson(text: string): Record<string, any> | undefined {
  const line = text.trim().split('\n').reverse().find((l) => l.startsWith('{'));
  try {
    return line ? JSON.parse(line) : undefined;
  } catch {
    return undefined;
  }
}

const cleanEnv = (extra: Record<string, string> = {}): NodeJS.ProcessEnv => {
  const env = { ...process.env, ...extra };
  if (!('PENSTOCK_COMPAT_MODE' in extra)) delete env.PENSTOCK_COMPAT_MODE;
  return env;
};

function finishRecord(rec: RunRecord, r: TimedRun, needReady: boolean): RunRecord {
  const why = failure(r) ?? (needReady && r.wallReadyS === undefined ? `no ready line: ${tail(r.stderr || r.stdout)}` : undefined);
  if (why) rec.error = why;
  else rec.ok = true;
  return rec;
}

async function penstockCli(ctx: RunContext, t: RunTarget, method: MethodId, rep: number): Promise<RunRecord[]> {
  const env = cleanEnv(method === 'penstock-cli-compat' ? { PENSTOCK_COMPAT_MODE: 'on' } : {});
  const r = await runTimed(process.execPath, ['--import', ctx.hookUrl, ctx.cliScript, 'load', '--device', '0', t.file], { env, timeoutS: ctx.runTimeoutS });
  const rec = base(t, method, rep, r);
  const secs = /Seconds: ([\d.]+)/.exec(r.stdout);
  if (secs) rec.loaderS = Number(secs[1]);
  const routes = /Routes: (.*)/.exec(r.stdout)?.[1];
  const why = /Why not GPUDirect Storage[^:]*: (.*)/.exec(r.stdout)?.[1];
  if (routes) rec.route = [routes.replace(/ \((\d+) ops, \d+ bytes\)/g, ' $1 ops'), why ? `not cuFile: ${why.slice(0, 120)}` : ''].filter(Boolean).join('; ');
  finishRecord(rec, r, true);
  if (rec.ok && !secs) {
    rec.ok = false;
    rec.error = `no "Seconds:" in the output: ${tail(r.stdout)}`;
  }
  return [rec];
}

/** `penstock load --verify --json`: every tensor from GPU memory against the file (the CLI's own check), and against the reference. */
export async function penstockCliCheck(ctx: RunContext, t: RunTarget): Promise<RunRecord> {
  const r = await runTimed(process.execPath, [ctx.cliScript, 'load', '--device', '0', '--verify', '--json', t.file], { env: cleanEnv(), timeoutS: ctx.runTimeoutS * 2 });
  const rec: RunRecord = { ...base(t, 'penstock-cli', 0, undefined), untimed: true };
  let j: { tensors?: { name: string; sha256?: string; fileSha256?: string; match?: boolean }[] } | undefined;
  try {
    j = JSON.parse(r.stdout);
  } catch {
    j = undefined;
  }
  if (!j?.tensors) {
    rec.error = `penstock load --verify: ${failure(r) ?? 'no JSON'}`;
    return rec;
  }
  const ref = (JSON.parse(fs.readFileSync(t.reference, 'utf8')) as { tensors: Record<string, string> }).tensors;
  const bad = j.tensors.filter((x) => !x.match || ref[x.name] !== x.sha256).length;
  const missing = Object.keys(ref).filter((k) => !j!.tensors!.some((x) => x.name === k)).length;
  rec.check = { compared: j.tensors.length, mismatched: bad, missing, how: '`penstock load --verify` (untimed run): GPU memory = file = reference' };
  rec.ok = r.code === 0 && bad === 0 && missing === 0;
  if (!rec.ok) rec.error = failure(r) ?? `${bad} tensors differ, ${missing} missing`;
  return rec;
}

async function penstockLib(ctx: RunContext, t: RunTarget, method: MethodId, rep: number, check: boolean, repeats: number): Promise<RunRecord[]> {
  const prepared = method === 'penstock-prepared';
  const args = [ctx.childScript, t.file, '--mode', prepared ? 'prepared' : 'fresh', ...(prepared ? ['--repeat', String(repeats)] : []), ...(check ? ['--reference', t.reference] : [])];
  const r = await runTimed(process.execPath, args, { env: cleanEnv(), timeoutS: ctx.runTimeoutS * (prepared ? 2 : 1) });
  const j = lastJson(r.stdout);
  const loads = (j?.loads ?? []) as { loaderS: number; bytes: number; routes: Routes; fallback?: string }[];
  const checkOf = (rec: RunRecord) => {
    if (j?.check) rec.check = { compared: j.check.compared, mismatched: j.check.mismatched, missing: j.check.missing, how: j.check.how };
  };
  if (!prepared) {
    const rec = base(t, method, rep, r);
    if (loads[0]) rec.route = routeText(loads[0].routes, loads[0].fallback);
    checkOf(rec);
    finishRecord(rec, r, true);
    if (rec.ok && !j?.ok) Object.assign(rec, { ok: false, error: j?.error ?? 'no result' });
    if (rec.check && (rec.check.mismatched || rec.check.missing)) Object.assign(rec, { ok: false, error: `check failed: ${JSON.stringify(j?.check?.firstBad)}` });
    return [rec];
  }
  const why = failure(r) ?? (j?.ok ? undefined : j?.error ?? 'no result');
  return Array.from({ length: repeats }, (_, i) => {
    const rec = base(t, method, i + 1, undefined);
    const l = loads[i];
    if (l) {
      rec.loaderS = l.loaderS;
      rec.route = routeText(l.routes, l.fallback);
    }
    if (i === repeats - 1) checkOf(rec);
    if (why || !l) rec.error = why ?? 'no such load';
    else rec.ok = !rec.check || (rec.check.mismatched === 0 && rec.check.missing === 0);
    return rec;
  });
}

async function loadFile(ctx: RunContext, t: RunTarget, rep: number, check: boolean): Promise<RunRecord[]> {
  const r = await runTimed(ctx.python, [ctx.peersScript, 'load_file', t.file, ...(check ? ['--reference', t.reference] : [])], { timeoutS: ctx.runTimeoutS });
  const rec = base(t, 'load_file', rep, r);
  const j = lastJson(r.stdout);
  if (j?.check) rec.check = { compared: j.check.compared, mismatched: j.check.mismatched, missing: j.check.missing, how: j.check.how };
  if (j?.versions) rec.note = `torch ${j.versions.torch}, safetensors ${j.versions.safetensors}`;
  finishRecord(rec, r, true);
  if (!rec.ok && j?.error) rec.error = j.error;
  return [rec];
}

async function kit(ctx: RunContext, t: RunTarget, method: 'fastsafetensors' | 'instanttensor', rep: number, check: boolean): Promise<RunRecord[]> {
  const k = ctx.kits.find((x) => x.name === method);
  if (!k?.ok) return [{ ...base(t, method, rep, undefined), skipped: true, error: `not run: ${k?.why ?? 'no kit'}` }];
  fs.mkdirSync(ctx.scratch, { recursive: true });
  const out = path.join(ctx.scratch, `${method}-${t.checkpoint}-${t.fs}-${t.state}-${rep}.json`);
  fs.rmSync(out, { force: true });
  const args = [ctx.peersScript, 'kit', k.dir, '--', t.file, '--mode', method === 'fastsafetensors' ? 'nogds' : 'aio', '--temp', t.state, '--json-out', out, ...(check ? ['--reference', t.reference] : ['--no-hash'])];
  const r = await runTimed(ctx.python, args, { env: { ...process.env, ...k.env }, timeoutS: ctx.runTimeoutS });
  const rec = base(t, method, rep, r);
  let j: Record<string, any> | undefined;
  try {
    j = JSON.parse(fs.readFileSync(out, 'utf8'));
  } catch {
    j = undefined;
  }
  if (j) {
    if (typeof j.seconds === 'number') rec.loaderS = j.seconds;
    const rc = j.reference_check;
    if (rc) rec.check = { compared: rc.compared, mismatched: rc.n_mismatched, missing: rc.n_missing, how: "the kit's own sha256 of every tensor from GPU memory vs the reference" };
    const eff = j.effective_copier ?? j.effective_mode;
    const settings = j.settings ? Object.entries(j.settings).filter(([, v]) => v !== null && v !== undefined).map(([a, b]) => `${a}=${b}`).join(' ') : '';
    rec.route = [eff ? `mode ${eff}` : '', settings].filter(Boolean).join('; ');
  }
  finishRecord(rec, r, true);
  if (j && !j.ok) Object.assign(rec, { ok: false, error: String(j.error ?? 'the kit says not ok').split('\n').filter(Boolean).pop()?.slice(0, 300) });
  return [rec];
}

async function dd(ctx: RunContext, t: RunTarget, method: 'dd-direct' | 'dd-buffered', rep: number): Promise<RunRecord[]> {
  const args = [`if=${t.file}`, 'of=/dev/null', 'bs=16M', ...(method === 'dd-direct' ? ['iflag=direct'] : [])];
  const r = await runTimed('dd', args, { env: { ...process.env, LC_ALL: 'C' }, timeoutS: ctx.runTimeoutS });
  const rec = base(t, method, rep, r);
  // dd's data is read when it exits: its ready moment is its exit.
  rec.wallReadyS = r.wallExitS;
  const d = parseDdOutput(r.stderr);
  if (d) {
    rec.loaderS = d.seconds;
    rec.bytes = d.bytes;
  }
  finishRecord(rec, r, false);
  if (rec.ok && !d) Object.assign(rec, { ok: false, error: `no rate in dd's output: ${tail(r.stderr)}` });
  return [rec];
}

/** Runs the method once (the prepared row: one process for all its repeats). */
export function runMethod(ctx: RunContext, t: RunTarget, method: MethodId, rep: number, check: boolean, repeats: number): Promise<RunRecord[]> {
  switch (method) {
    case 'penstock-cli':
    case 'penstock-cli-compat':
      return penstockCli(ctx, t, method, rep);
    case 'penstock-lib':
    case 'penstock-prepared':
      return penstockLib(ctx, t, method, rep, check, repeats);
    case 'load_file':
      return loadFile(ctx, t, rep, check);
    case 'fastsafetensors':
    case 'instanttensor':
      return kit(ctx, t, method, rep, check);
    case 'dd-direct':
    case 'dd-buffered':
      return dd(ctx, t, method, rep);
  }
}
