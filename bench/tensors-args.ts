/**
 * The command line of `bench:tensors` (pure: parsing and checks, no I/O).
 *
 *   npm run bench:tensors -- [--dir DIR] [--tmpfs-dir DIR|none] [--out DIR] [--peers DIR]
 *     [--python PY] [--only LIST] [--repeats 3] [--cold-repeats N] [--stop-after SECONDS]
 *     [--write-only | --report-only] [--fresh] [--layers 16] [--moe-layers 40] [--moe-experts 128]
 *     [--run-timeout 180] [--quick]
 */
import { parseArgs } from 'node:util';
import { parseOnly, type Selection } from './tensors-rows.js';

export interface BenchOptions {
  dir: string;
  /** Where the tmpfs copies go; undefined: no tmpfs rows. */
  tmpfsDir?: string;
  out: string;
  peers?: string;
  python: string;
  only: Selection;
  onlyText?: string;
  repeats: number;
  coldRepeats: number;
  /** Stop launching runs once this many seconds have passed (with the run's expected length). */
  stopAfterS?: number;
  writeOnly: boolean;
  reportOnly: boolean;
  /** Ignore runs.jsonl already in --out (it is moved aside). */
  fresh: boolean;
  layers: number;
  moeLayers: number;
  moeExperts: number;
  runTimeoutS: number;
  quick: boolean;
}

export const USAGE = `usage: npm run bench:tensors -- [options]
  --dir DIR           checkpoints on disk (default /var/tmp/penstock-bench-tensors)
  --tmpfs-dir DIR     tmpfs copies (default /dev/shm/penstock-bench-tensors; 'none': no tmpfs rows)
  --out DIR           runs.jsonl, tensors.json, tensors.md (default bench-results/tensors)
  --peers DIR         peer kits (fastsafetensors/, instanttensor/ with bench.py, build.sh)
  --python PY         interpreter for the Python rows (default $PENSTOCK_PYTHON or python3)
  --only LIST         methods, 7B|MoE, disk|tmpfs, warm|cold, penstock|peers|dd (comma-separated)
  --repeats N         fresh processes per row (default 3); --cold-repeats N for cold rows
  --stop-after S      launch no run that would end after S seconds from the start
  --write-only        write checkpoints, references and copies, build the peers; run nothing
  --report-only       render tensors.json and tensors.md from --out/runs.jsonl
  --fresh             start a new runs.jsonl (the old one is kept as runs.jsonl.N)
  --layers 16 --moe-layers 40 --moe-experts 128   checkpoint sizes; --quick: small ones (a set-up check)
  --run-timeout S     kill a run after S seconds (default 180)
`;

function positiveInt(name: string, v: string | undefined, dflt: number, min = 1): number {
  if (v === undefined) return dflt;
  if (!/^\d+$/.test(v) || Number(v) < min) throw new Error(`--${name} must be a whole number ≥ ${min}, got '${v}'`);
  return Number(v);
}

/** Parses the arguments (throws an Error with a sentence on bad input). */
export function parseBenchArgs(argv: readonly string[], env: Record<string, string | undefined> = {}): BenchOptions {
  const { values: o, positionals } = parseArgs({
    args: [...argv],
    allowPositionals: true,
    options: {
      dir: { type: 'string', default: '/var/tmp/penstock-bench-tensors' },
      'tmpfs-dir': { type: 'string', default: '/dev/shm/penstock-bench-tensors' },
      out: { type: 'string', default: 'bench-results/tensors' },
      peers: { type: 'string' },
      python: { type: 'string' },
      only: { type: 'string' },
      repeats: { type: 'string' },
      'cold-repeats': { type: 'string' },
      'stop-after': { type: 'string' },
      'write-only': { type: 'boolean', default: false },
      'report-only': { type: 'boolean', default: false },
      fresh: { type: 'boolean', default: false },
      layers: { type: 'string' },
      'moe-layers': { type: 'string' },
      'moe-experts': { type: 'string' },
      'run-timeout': { type: 'string' },
      quick: { type: 'boolean', default: false },
    },
  });
  if (positionals.length) throw new Error(`unexpected argument '${positionals[0]}'`);
  if (o['write-only'] && o['report-only']) throw new Error('--write-only and --report-only exclude each other');
  const repeats = positiveInt('repeats', o.repeats, 3);
  const stop = o['stop-after'];
  if (stop !== undefined && !(/^\d+(\.\d+)?$/.test(stop) && Number(stop) > 0)) throw new Error(`--stop-after must be a number of seconds > 0, got '${stop}'`);
  const tmpfs = o['tmpfs-dir'];
  const opts: BenchOptions = {
    dir: o.dir!,
    out: o.out!,
    python: o.python ?? env.PENSTOCK_PYTHON ?? 'python3',
    only: parseOnly(o.only),
    repeats,
    coldRepeats: positiveInt('cold-repeats', o['cold-repeats'], repeats),
    writeOnly: o['write-only']!,
    reportOnly: o['report-only']!,
    fresh: o.fresh!,
    layers: positiveInt('layers', o.layers, o.quick ? 2 : 16),
    moeLayers: positiveInt('moe-layers', o['moe-layers'], o.quick ? 2 : 40),
    moeExperts: positiveInt('moe-experts', o['moe-experts'], o.quick ? 8 : 128),
    runTimeoutS: positiveInt('run-timeout', o['run-timeout'], 180),
    quick: o.quick!,
  };
  if (tmpfs && tmpfs !== 'none') opts.tmpfsDir = tmpfs;
  if (o.peers) opts.peers = o.peers;
  if (o.only) opts.onlyText = o.only;
  if (stop !== undefined) opts.stopAfterS = Number(stop);
  return opts;
}

/**
 * Whether a run expected to take `expectS` may start at `elapsedS` under the budget: it must end
 * before the budget does (a run never started leaves its repeat for the next call to resume).
 */
export function fitsBudget(elapsedS: number, expectS: number, budgetS: number | undefined): boolean {
  return budgetS === undefined || elapsedS + expectS <= budgetS;
}
