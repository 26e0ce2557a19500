/**
 * What `bench:tensors` prepares before it times anything: the checkpoints (written here, on the
 * machine that measures them), the reference sha256 of every tensor from the files' bytes, the
 * tmpfs copies, the peers' builds, and the page-cache state before each run.
 */
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { dropFilePages, describeDrop } from '../src/cli/bench/cold.js';
import { native } from '../src/addon/binding.js';
import { decoderShapes, sevenBShapes, totalBytes, writeCheckpointFile, type TensorShape } from './tensor-checkpoints.js';
import { fileTensorHashes, HashPool } from './tensors-hash.js';
import type { CheckpointId } from './tensors-rows.js';

/** The 7B layout with `layers` layers and its norms in F32 (as real checkpoints often keep them); `small`: a quarter-width model of the same layout (a set-up check). */
export function sevenBF32Norms(layers: number, small = false): TensorShape[] {
  return (small ? decoderShapes({ hidden: 1024, intermediate: 2816, vocab: 8000, layers }) : sevenBShapes(layers)).map((t) => (t.name.endsWith('norm.weight') ? { ...t, dtype: 'F32' } : t));
}

/**
 * An MoE layout of many 512 KiB tensors: per layer attention (1024×1024), a router, `experts`
 * × (gate, up, down) of 256×1024 bf16, norms in F32; embeddings and head 32000×1024.
 */
export function moe512Shapes(layers: number, experts: number): TensorShape[] {
  const h = 1024;
  const out: TensorShape[] = [{ name: 'model.embed_tokens.weight', dtype: 'BF16', shape: [32000, h] }];
  for (let i = 0; i < layers; i++) {
    const p = `model.layers.${i}`;
    for (const x of ['q', 'k', 'v', 'o']) out.push({ name: `${p}.self_attn.${x}_proj.weight`, dtype: 'BF16', shape: [h, h] });
    out.push({ name: `${p}.mlp.gate.weight`, dtype: 'BF16', shape: [experts, h] });
    for (let j = 0; j < experts; j++) {
      out.push({ name: `${p}.mlp.experts.${j}.gate_proj.weight`, dtype: 'BF16', shape: [256, h] });
      out.push({ name: `${p}.mlp.experts.${j}.up_proj.weight`, dtype: 'BF16', shape: [256, h] });
      out.push({ name: `${p}.mlp.experts.${j}.down_proj.weight`, dtype: 'BF16', shape: [h, 256] });
    }
    out.push({ name: `${p}.input_layernorm.weight`, dtype: 'F32', shape: [h] });
    out.push({ name: `${p}.post_attention_layernorm.weight`, dtype: 'F32', shape: [h] });
  }
  out.push({ name: 'model.norm.weight', dtype: 'F32', shape: [h] });
  out.push({ name: 'lm_head.weight', dtype: 'BF16', shape: [32000, h] });
  return out;
}

export interface PreparedCheckpoint {
  id: CheckpointId;
  /** On --dir's file system. */
  file: string;
  /** The tmpfs copy, when there is one. */
  tmpfsFile?: string;
  /** Why there is no tmpfs copy. */
  tmpfsSkipped?: string;
  tensors: number;
  tensorBytes: number;
  fileBytes: number;
  /** `{ tensors: { name: sha256 } }` from the file's bytes. */
  reference: string;
  describe: string;
}

function headerOk(file: string, tensors: number, bytes: number): boolean {
  try {
    const fd = fs.openSync(file, 'r');
    try {
      const head = Buffer.alloc(8);
      fs.readSync(fd, head, 0, 8, 0);
      const n = Number(head.readBigUInt64LE(0));
      if (n > 64 << 20) return false;
      const json = Buffer.alloc(n);
      fs.readSync(fd, json, 0, n, 8);
      const hdr = JSON.parse(json.toString('utf8')) as Record<string, unknown>;
      return Object.keys(hdr).filter((k) => k !== '__metadata__').length === tensors && fs.fstatSync(fd).size === 8 + n + bytes;
    } finally {
      fs.closeSync(fd);
    }
  } catch {
    return false;
  }
}

/** Writes the checkpoint unless an equal one is there; the reference hashes likewise. */
export async function ensureCheckpoint(id: CheckpointId, shapes: TensorShape[], dir: string, pool: HashPool, log: (s: string) => void): Promise<PreparedCheckpoint> {
  fs.mkdirSync(dir, { recursive: true });
  const file = path.join(dir, `${id}-shaped.safetensors`);
  const bytes = totalBytes(shapes);
  if (!headerOk(file, shapes.length, bytes)) {
    log(`writing ${file}: ${shapes.length} tensors, ${(bytes / 1e9).toFixed(2)} GB`);
    const t0 = performance.now();
    writeCheckpointFile(file, shapes);
    log(`  written in ${((performance.now() - t0) / 1e3).toFixed(1)} s`);
  }
  const st = fs.statSync(file);
  const reference = `${file}.sha256.json`;
  let ok = false;
  try {
    const r = JSON.parse(fs.readFileSync(reference, 'utf8')) as { size: number; mtimeMs: number };
    ok = r.size === st.size && r.mtimeMs === st.mtimeMs;
  } catch {
    ok = false;
  }
  if (!ok) {
    const t0 = performance.now();
    const tensors = await fileTensorHashes(file, pool);
    fs.writeFileSync(reference, JSON.stringify({ file, size: st.size, mtimeMs: st.mtimeMs, how: 'sha256 of each tensor\'s bytes in the file (fs reads)', tensors }));
    log(`reference sha256 of ${Object.keys(tensors).length} tensors in ${((performance.now() - t0) / 1e3).toFixed(1)} s`);
  }
  const describe = `${shapes.length} tensors, ${(bytes / 1e9).toFixed(2)} GB (${(bytes / 2 ** 30).toFixed(2)} GiB) of tensor data`;
  return { id, file, tensors: shapes.length, tensorBytes: bytes, fileBytes: st.size, reference, describe };
}

/** Copies the checkpoint to tmpfs when it fits (keeping 4 GiB of the tmpfs free). */
export function ensureTmpfsCopy(cp: PreparedCheckpoint, tmpfsDir: string | undefined, log: (s: string) => void): void {
  if (!tmpfsDir) {
    cp.tmpfsSkipped = 'no tmpfs directory (--tmpfs-dir none)';
    return;
  }
  try {
    fs.mkdirSync(tmpfsDir, { recursive: true });
    const dst = path.join(tmpfsDir, path.basename(cp.file));
    const src = fs.statSync(cp.file);
    const have = fs.existsSync(dst) ? fs.statSync(dst) : undefined;
    if (have && have.size === src.size && have.mtimeMs >= src.mtimeMs) {
      cp.tmpfsFile = dst;
      return;
    }
    if (have) fs.rmSync(dst);
    const s = fs.statfsSync(tmpfsDir);
    const free = s.bavail * s.bsize;
    if (free < src.size + 4 * 2 ** 30) {
      cp.tmpfsSkipped = `${tmpfsDir} has ${(free / 2 ** 30).toFixed(1)} GiB free, ${(src.size / 2 ** 30).toFixed(1)} GiB + 4 GiB needed`;
      return;
    }
    const t0 = performance.now();
    fs.copyFileSync(cp.file, dst);
    log(`copied to ${dst} in ${((performance.now() - t0) / 1e3).toFixed(1)} s`);
    cp.tmpfsFile = dst;
  } catch (err) {
    cp.tmpfsSkipped = `copy to ${tmpfsDir} failed: ${(err as Error).message}`;
  }
}

// ---------------------------------------------------------------------------------------------
// Page-cache state

/**
 * Fraction of the file's pages in the page cache, -1 if unknown: every page through util-linux's
 * `fincore` (mincore over the whole file in a few calls), else mincore on `samples` pages spread
 * evenly (one call per page, slow for millions of pages).
 */
export function residentFraction(file: string, samples = 1 << 12): number {
  const f = spawnSync('fincore', ['--bytes', '--noheadings', '--output', 'RES,SIZE', file], { encoding: 'utf8' });
  const m = f.status === 0 ? /^\s*(\d+)\s+(\d+)\s*$/.exec(f.stdout) : null;
  if (m) return Number(m[2]) === 0 ? 1 : Math.min(1, Number(m[1]) / Number(m[2]));
  const fd = fs.openSync(file, 'r');
  try {
    const size = fs.fstatSync(fd).size;
    return size === 0 ? 1 : native().residency(fd, 0, size, Math.max(1, Math.min(samples, Math.ceil(size / 4096))));
  } finally {
    fs.closeSync(fd);
  }
}

/** Puts the file in the page cache (reading it once if less than 99.5 % is there). */
export function makeWarm(file: string): { resident: number; note?: string } {
  let r = residentFraction(file);
  if (r >= 0 && r < 0.995) {
    spawnSync('cat', [file], { stdio: ['ignore', 'ignore', 'inherit'] });
    r = residentFraction(file);
  }
  return r >= 0 && r < 0.99 ? { resident: r, note: `only ${(r * 100).toFixed(1)} % of the file stayed in the page cache` } : { resident: r };
}

/** Drops the file's pages; `dropped` only when mincore sees ≤ 1 % left. */
export function makeCold(file: string): { dropped: boolean; resident: number; how: string } {
  const d = dropFilePages(file);
  const resident = residentFraction(file);
  const dropped = resident >= 0 && resident <= 0.01;
  return { dropped, resident, how: dropped ? `dropped: ${d.method}, mincore ${(resident * 100).toFixed(2)} % resident` : `pages could not be dropped: ${describeDrop(d)}` };
}

// ---------------------------------------------------------------------------------------------
// Peers

export interface PeerKit {
  name: 'fastsafetensors' | 'instanttensor';
  dir: string;
  /** Built and usable; else why not. */
  ok: boolean;
  why?: string;
  /** Extra environment for its runs. */
  env: Record<string, string>;
  log?: string;
}

const BUILT: Record<PeerKit['name'], RegExp> = { fastsafetensors: /^cpp.*\.so$/, instanttensor: /^_C.*\.so$/ };

function built(kit: PeerKit): boolean {
  const sub = path.join(kit.dir, kit.name);
  return fs.existsSync(sub) && fs.readdirSync(sub).some((f) => BUILT[kit.name].test(f));
}

/** Builds each kit in place (its own build.sh), both at once; resolves when both are done. */
export async function buildPeers(peersDir: string | undefined, python: string, peersScript: string, logDir: string, log: (s: string) => void): Promise<PeerKit[]> {
  const names: PeerKit['name'][] = ['fastsafetensors', 'instanttensor'];
  if (!peersDir) return names.map((name) => ({ name, dir: '', ok: false, why: 'no --peers folder given', env: {} }));
  fs.mkdirSync(logDir, { recursive: true });
  return Promise.all(
    names.map(async (name): Promise<PeerKit> => {
      const kit: PeerKit = { name, dir: path.resolve(peersDir, name), ok: false, env: {} };
      if (!fs.existsSync(path.join(kit.dir, 'bench.py')) || !fs.existsSync(path.join(kit.dir, 'build.sh'))) return { ...kit, why: `no bench.py and build.sh in ${kit.dir}` };
      if (!built(kit)) {
        // The kits come read-only; each builds in place, in this copy of it.
        spawnSync('chmod', ['-R', 'u+w', kit.dir]);
        kit.log = path.join(logDir, `build-${name}.log`);
        const fd = fs.openSync(kit.log, 'w');
        const t0 = performance.now();
        const code = await new Promise<number | null>((resolve) => {
          const c = spawn('bash', ['build.sh'], { cwd: kit.dir, env: { ...process.env, PYTHON: python }, stdio: ['ignore', fd, fd] });
          c.on('error', () => resolve(-1));
          c.on('close', (x) => resolve(x));
        });
        fs.closeSync(fd);
        const last = fs.readFileSync(kit.log, 'utf8').trim().split('\n').pop() ?? '';
        log(`${name}: build ${code === 0 ? 'ok' : 'FAILED'} in ${((performance.now() - t0) / 1e3).toFixed(0)} s: ${last}`);
        if (code !== 0 || !built(kit)) return { ...kit, why: `build failed: ${last.slice(0, 200)}` };
      }
      if (name === 'fastsafetensors') {
        // It dlopens "libcudart.so"; where only a suffixed one exists, its bench re-executes
        // itself (a second torch import in the timed process) unless the folder is on the path.
        const r = spawnSync(python, [peersScript, 'cudart', kit.dir], { encoding: 'utf8' });
        const d = r.status === 0 ? r.stdout.trim() : '';
        if (d) kit.env = { LD_LIBRARY_PATH: [d, process.env.LD_LIBRARY_PATH].filter(Boolean).join(':'), _FST_BENCH_CUDART: `LD_LIBRARY_PATH starts with ${d} (set by bench:tensors)` };
      }
      return { ...kit, ok: true };
    }),
  );
}
