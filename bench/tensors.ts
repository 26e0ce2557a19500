/**
 * `npm run bench:tensors`: what a user pays to load a checkpoint into GPU memory, in the frames
 * users run: a fresh process per load, timed from the process's start to its tensors being in
 * GPU memory (the parent's clock, from spawn to the child's ready line, and the child's own from
 * its start), beside each loader's own clock. penstock (the CLI with defaults and with
 * PENSTOCK_COMPAT_MODE=on, the library in a fresh child, and a prepared process loading again as
 * a secondary row) against Python safetensors `load_file`, fastsafetensors and InstantTensor (from
 * `--peers`, built here from their kits and run as external programs), and `dd` O_DIRECT and
 * buffered for cold reads; warm (pages cached) and cold (dropped, checked with mincore); a
 * 7B-shaped and an MoE-shaped checkpoint, from the disk and from tmpfs.
 *
 * Every run is a line of --out/runs.jsonl as soon as it ends; a later call with the same --out
 * resumes where the last one stopped (--stop-after keeps a call inside a time limit). At the end
 * (and with --report-only) tensors.json and tensors.md are written from runs.jsonl. See
 * bench/tensors-args.ts for the options.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { fileSystemType, machineInfo } from '../src/cli/bench/system.js';
import { fitsBudget, parseBenchArgs, USAGE, type BenchOptions } from './tensors-args.js';
import { HashPool } from './tensors-hash.js';
import { aggregate, METHODS, plannedGroups, renderMarkdown, rowKey, type CheckpointId, type Group, type MethodId, type RunRecord } from './tensors-rows.js';
import { penstockCliCheck, runMethod, type RunContext } from './tensors-run.js';
import { buildPeers, ensureCheckpoint, ensureTmpfsCopy, makeCold, makeWarm, moe512Shapes, sevenBF32Norms, type PreparedCheckpoint } from './tensors-setup.js';
import { runTimed } from './tensors-spawn.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, '..', '..');
let opts: BenchOptions;
try {
  opts = parseBenchArgs(process.argv.slice(2), process.env);
} catch (err) {
  process.stderr.write(`bench:tensors: ${(err as Error).message}\n${USAGE}`);
  process.exit(2);
}
const out = path.resolve(opts.out);
fs.mkdirSync(out, { recursive: true });
const runsPath = path.join(out, 'runs.jsonl');
if (opts.fresh && fs.existsSync(runsPath)) {
  let n = 1;
  while (fs.existsSync(`${runsPath}.${n}`)) n++;
  fs.renameSync(runsPath, `${runsPath}.${n}`);
}
const T0 = performance.now();
const elapsed = () => (performance.now() - T0) / 1e3;
const log = (s: string) => {
  const line = `[${elapsed().toFixed(0).padStart(4)} s] ${s}\n`;
  process.stderr.write(line);
  fs.appendFileSync(path.join(out, 'bench.log'), line);
};
const append = (r: object) => fs.appendFileSync(runsPath, JSON.stringify(r) + '\n');

interface SetupRecord {
  type: 'setup';
  at: string;
  machine: ReturnType<typeof machineInfo>;
  gpu?: string;
  python?: string;
  diskFs: string;
  checkpoints: PreparedCheckpoint[];
  kits: { name: string; ok: boolean; why?: string; dir: string }[];
  options: BenchOptions;
}

function readRecords(): (RunRecord | SetupRecord)[] {
  if (!fs.existsSync(runsPath)) return [];
  return fs
    .readFileSync(runsPath, 'utf8')
    .split('\n')
    .filter(Boolean)
    .flatMap((l) => {
      try {
        return [JSON.parse(l) as RunRecord | SetupRecord];
      } catch {
        return [];
      }
    });
}

const groups = plannedGroups(opts.only);
const repsOf = (g: Group, o: BenchOptions = opts) => (g.state === 'cold' ? o.coldRepeats : o.repeats);

/** Runs planned by `o` (the options of the run being reported) and not yet in runs.jsonl. */
function leftToRun(records: readonly RunRecord[], o: BenchOptions): number {
  const done = new Set(records.filter((r) => r.type === 'run' && !r.untimed && !r.skipped).map((r) => `${rowKey(r)}|${r.rep}`));
  let n = 0;
  for (const g of plannedGroups(o.only)) for (const m of g.methods) for (let rep = 1; rep <= repsOf(g, o); rep++) if (!done.has(`${rowKey({ ...g, method: m })}|${rep}`)) n++;
  return n;
}

function writeReport(stopped?: string): void {
  const all = readRecords();
  const runs = all.filter((r): r is RunRecord => r.type === 'run');
  const setup = all.filter((r): r is SetupRecord => r.type === 'setup').pop();
  const rows = aggregate(runs);
  // --report-only reports on the run as its own options planned it.
  const left = leftToRun(runs, opts.reportOnly && setup ? setup.options : opts);
  const cps: Partial<Record<CheckpointId, string>> = {};
  for (const c of setup?.checkpoints ?? []) cps[c.id] = `${c.id}-shaped: ${c.describe}; ${c.file}${c.tmpfsFile ? ` and ${c.tmpfsFile}` : ` (no tmpfs copy: ${c.tmpfsSkipped})`}`;
  const head = [
    '# bench:tensors',
    '',
    setup ? `Machine: ${setup.gpu ?? 'GPU unknown'}; ${setup.machine.cpus} CPUs (${setup.machine.cpuModel}), ${(setup.machine.memoryBytes / 2 ** 30).toFixed(0)} GiB, kernel ${setup.machine.kernel}, node ${setup.machine.node}; python: ${setup.python ?? 'unknown'}; --dir on ${setup.diskFs}.` : 'No setup record.',
    setup ? `Peers: ${setup.kits.map((k) => `${k.name} ${k.ok ? 'built' : `not run (${k.why})`}`).join('; ')}.` : '',
    stopped ? `**Stopped early: ${stopped}.**` : '',
    left ? `**${left} planned runs not done yet**: run the same command again (same --out) to resume.` : 'Every planned run is done.',
    '',
  ].filter((l, i, a) => l !== '' || a[i - 1] !== '');
  const md = head.join('\n') + '\n' + renderMarkdown(rows, { diskFs: setup?.diskFs, checkpoints: cps });
  fs.writeFileSync(path.join(out, 'tensors.md'), md);
  fs.writeFileSync(path.join(out, 'tensors.json'), JSON.stringify({ generated: new Date().toISOString(), stopped, leftToRun: left, setup, methods: METHODS, rows }, null, 2));
  process.stdout.write(md + `\nFiles: ${path.join(out, 'tensors.md')}, ${path.join(out, 'tensors.json')}, ${runsPath}\n`);
}

if (opts.reportOnly) {
  writeReport();
  process.exit(0);
}

// ---------------------------------------------------------------------------------------------
// Set-up: peers build while the checkpoints are written.

const peersScript = path.join(repo, 'bench', 'tensors_peers.py');
const kitsP = buildPeers(opts.peers, opts.python, peersScript, path.join(out, 'logs'), log);
const pyP = runTimed(opts.python, ['-c', 'import torch, safetensors; print(f"{__import__(\'sys\').version.split()[0]}, torch {torch.__version__}, safetensors {safetensors.__version__}, cuda {torch.cuda.is_available()}")'], { timeoutS: 120 });
const wanted = new Set<CheckpointId>(opts.writeOnly ? (opts.only.checkpoints ?? ['7B', 'MoE']) : groups.map((g) => g.checkpoint));
const wantTmpfs = opts.writeOnly ? !opts.only.fs || opts.only.fs.includes('tmpfs') : groups.some((g) => g.fs === 'tmpfs');
const pool = new HashPool();
const checkpoints = new Map<CheckpointId, PreparedCheckpoint>();
for (const id of ['7B', 'MoE'] as const) {
  if (!wanted.has(id)) continue;
  const shapes = id === '7B' ? sevenBF32Norms(opts.layers, opts.quick) : moe512Shapes(opts.moeLayers, opts.moeExperts);
  const cp = await ensureCheckpoint(id, shapes, path.resolve(opts.dir), pool, log);
  if (wantTmpfs) ensureTmpfsCopy(cp, opts.tmpfsDir, log);
  checkpoints.set(id, cp);
}
await pool.close();
const kits = await kitsP;
const py = await pyP;
const gpu = spawnSync('nvidia-smi', ['--query-gpu=name,memory.total,driver_version', '--format=csv,noheader'], { encoding: 'utf8' });
const setup: SetupRecord = {
  type: 'setup',
  at: new Date().toISOString(),
  machine: machineInfo(),
  gpu: gpu.status === 0 ? gpu.stdout.trim().split('\n')[0] : undefined,
  python: py.code === 0 ? `${opts.python} ${py.stdout.trim()}` : `${opts.python} unusable: ${(py.stderr || py.spawnError || '').trim().split('\n').pop()}`,
  diskFs: fileSystemType(path.resolve(opts.dir)),
  checkpoints: [...checkpoints.values()],
  kits: kits.map((k) => ({ name: k.name, ok: k.ok, why: k.why, dir: k.dir })),
  options: opts,
};
append(setup);
log(`set-up done: ${setup.python}; ${setup.kits.map((k) => `${k.name} ${k.ok ? 'ok' : k.why}`).join('; ')}`);
if (opts.writeOnly) {
  writeReport();
  process.exit(0);
}

// ---------------------------------------------------------------------------------------------
// Runs: groups in order; inside a group, repeat by repeat, every method once (interleaved).

const ctx: RunContext = {
  python: opts.python,
  peersScript,
  childScript: path.join(here, 'tensors-child.js'),
  cliScript: path.join(repo, 'dist', 'src', 'cli', 'main.js'),
  hookUrl: pathToFileURL(path.join(here, 'ready-hook.js')).href,
  runTimeoutS: opts.runTimeoutS,
  scratch: path.join(out, 'scratch'),
  kits,
};
const existing = readRecords().filter((r): r is RunRecord => r.type === 'run');
const done = new Set(existing.filter((r) => !r.skipped).map((r) => `${rowKey(r)}|${r.untimed ? 'check' : r.rep}`));
const seen = new Map<string, number>();

/** A first guess of a run's length, until one like it has run. */
function expectS(m: MethodId, g: Group, cp: PreparedCheckpoint): number {
  const got = seen.get(`${m}|${g.state}|${g.checkpoint}`);
  if (got !== undefined) return got;
  const disk = g.state === 'cold' || (m === 'instanttensor' && g.fs === 'disk') ? cp.fileBytes / 1.2e9 : 0;
  if (m.startsWith('dd-')) return disk + 1;
  if (m === 'penstock-prepared') return 5 + (opts.repeats + 1) * (cp.fileBytes / 15e9);
  return (m.startsWith('penstock') ? 5 : 15) + disk;
}

let stopped: string | undefined;
outer: for (const g of groups) {
  const cp = checkpoints.get(g.checkpoint)!;
  const file = g.fs === 'tmpfs' ? cp.tmpfsFile : cp.file;
  const target = { checkpoint: g.checkpoint, fs: g.fs, state: g.state, file: file ?? '', reference: cp.reference, tensorBytes: cp.tensorBytes };
  log(`group ${g.checkpoint} ${g.fs} ${g.state}: ${g.methods.join(', ')}`);
  for (let rep = 1; rep <= repsOf(g); rep++) {
    for (const m of g.methods) {
      if (m === 'penstock-prepared' && rep > 1) continue;
      const key = rowKey({ ...g, method: m });
      if (done.has(`${key}|${rep}`)) continue;
      if (!file) {
        append({ ...target, type: 'run', method: m, rep, ok: false, skipped: true, bytes: cp.tensorBytes, error: `not run: ${cp.tmpfsSkipped}`, at: new Date().toISOString() } satisfies RunRecord);
        continue;
      }
      const exp = expectS(m, g, cp);
      if (!fitsBudget(elapsed(), exp, opts.stopAfterS)) {
        stopped = `--stop-after ${opts.stopAfterS} s reached at ${elapsed().toFixed(0)} s (next: ${key} run ${rep}, about ${exp.toFixed(0)} s)`;
        break outer;
      }
      const t = performance.now();
      let resident: number;
      let drop: string | undefined;
      let note: string | undefined;
      if (g.state === 'cold') {
        const c = makeCold(file);
        resident = c.resident;
        drop = c.how;
        if (!c.dropped) {
          append({ ...target, type: 'run', method: m, rep, ok: false, skipped: true, bytes: cp.tensorBytes, residentBefore: resident, drop, error: drop, at: new Date().toISOString() } satisfies RunRecord);
          log(`  ${m} run ${rep}: ${drop}`);
          continue;
        }
      } else ({ resident, note } = makeWarm(file));
      const recs = await runMethod(ctx, target, m, rep, rep === 1, opts.repeats);
      for (const r of recs) {
        r.residentBefore = resident;
        if (drop) r.drop = drop;
        if (note) r.note = r.note ? `${r.note}; ${note}` : note;
        append(r);
      }
      seen.set(`${m}|${g.state}|${g.checkpoint}`, (performance.now() - t) / 1e3 + 1);
      const r0 = recs[recs.length - 1]!;
      log(`  ${m} run ${rep}: ${r0.ok ? `ready ${r0.wallReadyS?.toFixed(3) ?? '—'} s, loader ${r0.loaderS?.toFixed(3)} s${r0.check ? `, check ${r0.check.compared - r0.check.mismatched}/${r0.check.compared}` : ''}` : `FAILED ${r0.error}`}`);
    }
  }
  if (g.fs === 'disk' && g.state === 'warm' && g.methods.includes('penstock-cli') && file && !done.has(`${rowKey({ ...g, method: 'penstock-cli' })}|check`)) {
    if (!fitsBudget(elapsed(), 10 + cp.fileBytes / 1e9, opts.stopAfterS)) {
      stopped = `--stop-after ${opts.stopAfterS} s reached before the penstock load --verify check of ${g.checkpoint}`;
      break;
    }
    makeWarm(file);
    const r = await penstockCliCheck(ctx, target);
    append(r);
    log(`  penstock load --verify: ${r.ok ? `${r.check?.compared} tensors equal` : `FAILED ${r.error}`}`);
  }
}
writeReport(stopped);
