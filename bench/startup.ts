/**
 * `npm run bench:startup -- FILE`: where a fresh process's first load into a GPU spends its time.
 * Each variant runs in fresh processes (`--repeat` each); every step is timed from the process's
 * start, and the table gives each step's median milliseconds (its own cost, and the time since
 * start when it ends). Also times `penstock load --device 0 FILE` as users run it, whole process.
 *
 *   npm run bench:startup -- FILE [--repeat 3] [--out FILE.json]
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { median } from '../src/cli/bench/stats.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, '..', '..');
const { values: o, positionals } = parseArgs({ allowPositionals: true, options: { repeat: { type: 'string', default: '3' }, out: { type: 'string' } } });
const file = positionals[0];
if (!file) throw new Error('usage: bench:startup FILE');
const repeat = Number(o.repeat);
const child = path.join(here, 'startup-child.js');
const cli = path.join(repo, 'dist/src/cli/main.js');

interface Variant { name: string; steps: string; env?: Record<string, string>; extra?: string[] }
const variants: Variant[] = [
  { name: 'staged, every step', steps: 'import,cuda,context,pool,bounce,gather,slab,data', env: { PENSTOCK_COMPAT_MODE: 'on' } },
  { name: 'with cuFile driver open', steps: 'import,cuda,context,pool,bounce,cufile,slab,data' },
  { name: 'bounce 4 MiB per worker', steps: 'cuda,context,pool,bounce,slab,data', env: { PENSTOCK_COMPAT_MODE: 'on' }, extra: ['--bounce', String(4 << 20)] },
  { name: 'bounce 16 MiB per worker', steps: 'cuda,context,pool,bounce,slab,data', env: { PENSTOCK_COMPAT_MODE: 'on' }, extra: ['--bounce', String(16 << 20)] },
  { name: 'slab before staging', steps: 'cuda,context,slab,pool,bounce,data', env: { PENSTOCK_COMPAT_MODE: 'on' } },
];

const results: unknown[] = [];
for (const v of variants) {
  const runs: Record<string, number>[] = [];
  for (let i = 0; i < repeat; i++) {
    const r = spawnSync(process.execPath, [child, '--steps', v.steps, ...(v.extra ?? []), file], { encoding: 'utf8', env: { ...process.env, ...v.env } });
    if (r.status !== 0) throw new Error(`${v.name}: ${r.stderr}`);
    runs.push(JSON.parse(r.stdout.trim().split('\n').pop()!).marks);
  }
  const names = ['entered', 'addonModule', 'addonLoaded', ...v.steps.split(',')];
  process.stdout.write(`\n${v.name} (median of ${repeat} fresh processes, ms)\n`);
  let prev = 0;
  for (const s of names) {
    const at = median(runs.map((m) => m[s]!));
    process.stdout.write(`  ${s.padEnd(12)} ${(at - prev).toFixed(1).padStart(8)}   at ${at.toFixed(1)}\n`);
    prev = at;
  }
  results.push({ variant: v, runs });
}

for (const compat of ['auto', 'on']) {
  const walls: number[] = [];
  const loader: number[] = [];
  for (let i = 0; i < repeat; i++) {
    const t0 = performance.now();
    const r = spawnSync(process.execPath, [cli, 'load', '--device', '0', '--json', file], { encoding: 'utf8', env: { ...process.env, PENSTOCK_COMPAT_MODE: compat } });
    walls.push(performance.now() - t0);
    if (r.status !== 0) throw new Error(`penstock load: ${r.stderr}`);
    loader.push(JSON.parse(r.stdout).seconds * 1e3);
  }
  process.stdout.write(`\npenstock load --device 0, PENSTOCK_COMPAT_MODE=${compat}: whole process ${median(walls).toFixed(0)} ms (${walls.map((w) => w.toFixed(0)).join(', ')}), loader ${median(loader).toFixed(0)} ms (${loader.map((w) => w.toFixed(0)).join(', ')})\n`);
  results.push({ cli: compat, walls, loader });
}
if (o.out) fs.writeFileSync(o.out, JSON.stringify(results, null, 2));
