/**
 * `penstock load PATH... [--device N | --host [--pinned]] [--prefix P] [--names A,B] [--rows K/N]
 * [--verify] [--json]`: loads a checkpoint, prints what it took (bytes, seconds, GB/s, the routes,
 * the fallback reasons). `--verify` hashes every tensor from the memory it landed in and from
 * the file; any mismatch exits with status 3.
 */
import { parseArgs } from 'node:util';
import { loadTensors, type LoadTensorsOptions } from '../tensors/loader.js';
import { verifyTensorSet, type TensorCheck } from '../tensors/verify.js';

const USAGE =
  'usage: penstock load PATH... [--device N | --host [--pinned]] [--prefix P] [--names A,B] [--rows K/N] [--verify] [--json]\n';

export async function runLoadCli(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        device: { type: 'string' },
        host: { type: 'boolean', default: false },
        pinned: { type: 'boolean', default: false },
        prefix: { type: 'string' },
        names: { type: 'string' },
        rows: { type: 'string' },
        verify: { type: 'boolean', default: false },
        json: { type: 'boolean', default: false },
        help: { type: 'boolean', short: 'h', default: false },
      },
    });
  } catch (err) {
    process.stderr.write(`penstock load: ${(err as Error).message}\n${USAGE}`);
    return 2;
  }
  const { values: v, positionals } = parsed;
  if (v.help) {
    process.stdout.write(USAGE);
    return 0;
  }
  const bad = (msg: string) => {
    process.stderr.write(`penstock load: ${msg}\n${USAGE}`);
    return 2;
  };
  if (positionals.length === 0) return bad('no path given');
  if (v.host && v.device !== undefined) return bad('--device and --host exclude each other');
  if (v.pinned && !v.host) return bad('--pinned goes with --host');
  if (v.prefix !== undefined && v.names !== undefined) return bad('--prefix and --names exclude each other');
  const opts: LoadTensorsOptions = {};
  if (v.host) opts.host = v.pinned ? 'pinned' : true;
  if (v.device !== undefined) {
    if (!/^\d+$/.test(v.device)) return bad(`--device must be a GPU ordinal, got '${v.device}'`);
    opts.device = Number(v.device);
  }
  if (v.prefix !== undefined) opts.filter = { prefix: v.prefix };
  if (v.names !== undefined) opts.filter = v.names.split(',').filter((s) => s.length > 0);
  if (v.rows !== undefined) {
    const m = /^(\d+)\/(\d+)$/.exec(v.rows);
    if (!m) return bad(`--rows must be K/N (shard K of N, from 0), got '${v.rows}'`);
    opts.rows = { index: Number(m[1]), count: Number(m[2]) };
  }
  using set = await loadTensors(positionals.length === 1 ? positionals[0]! : positionals, opts);
  let checks: TensorCheck[] | undefined;
  if (v.verify) checks = await verifyTensorSet(set);
  const mismatches = checks?.filter((c) => !c.match) ?? [];
  const routes = set.routeTotals();
  const fallbacks = set.files.filter((f) => f.fallback).map((f) => ({ path: f.path, ...f.fallback! }));
  const gbps = set.seconds > 0 ? set.bytes / set.seconds / 1e9 : 0;
  const target = set.place.kind === 'device' ? `GPU ${set.place.device}` : set.place.pinned ? 'pinned host memory' : 'host memory';
  if (v.json) {
    const bySha = new Map(checks?.map((c) => [c.name, c]) ?? []);
    const report = {
      target,
      bytes: set.bytes,
      seconds: set.seconds,
      gbps,
      tensorCount: set.size,
      tensors: set.tensors.map((t) => {
        const c = bySha.get(t.name);
        return { name: t.name, dtype: t.dtype, shape: t.shape, bytes: t.byteLength, ...(c ? { sha256: c.sha256, fileSha256: c.fileSha256, match: c.match } : {}) };
      }),
      routes,
      files: set.files,
      fallbacks,
      ...(checks ? { verified: mismatches.length === 0, mismatches: mismatches.map((c) => c.name) } : {}),
    };
    process.stdout.write(JSON.stringify(report, null, 2) + '\n');
  } else {
    const out: string[] = [];
    out.push(`Loaded ${set.size} tensors, ${set.bytes} bytes from ${set.files.length} file(s) into ${target}`);
    out.push(`Seconds: ${set.seconds.toFixed(4)}  Throughput: ${gbps.toFixed(2)} GB/s`);
    const r = Object.entries(routes).map(([k, c]) => `${k} (${c.ops} ops, ${c.bytes} bytes)`);
    out.push(`Routes: ${r.length ? r.join(', ') : 'none (nothing to read)'}`);
    for (const f of fallbacks) out.push(`Why not GPUDirect Storage (${f.path}): [${f.code}] ${f.message}`);
    if (checks) out.push(mismatches.length === 0 ? `Verified: all ${checks.length} tensors match their files (sha256)` : `Verified: MISMATCH in ${mismatches.length} tensor(s): ${mismatches.slice(0, 10).map((c) => c.name).join(', ')}`);
    process.stdout.write(out.join('\n') + '\n');
  }
  return mismatches.length > 0 ? 3 : 0;
}
