/**
 * `penstock load PATH... [--device N | --host [--pinned]] [--prefix P] [--names A,B] [--rows K/N]
 * [--verify] [--anonymous] [--json]`: loads a checkpoint and prints what it took (bytes, seconds,
 * GB/s, the routes, the fallback reasons). `--verify` hashes every tensor from the memory it
 * landed in and from the file; any mismatch exits with status 3.
 */
import { loadTensors, type LoadTensorsOptions } from '../tensors/loader.js';
import { verifyTensorSet, type TensorCheck } from '../tensors/verify.js';
import { terminalJson, terminalText } from '../vocabulary/terminal-text.js';
import { isRouteReason } from '../vocabulary/reasons.js';
import { ArgError, parseTarget } from './kit/args.js';
import type { ParsedLine } from './kit/command.js';
import { ProgressBar } from './kit/progress.js';
import { EXIT, describeError, progressWanted } from './common.js';
import { sourceOpener } from './sources.js';

/** Errors that mean "no GPU to load into": the hint to add --host goes with them. */
const NO_GPU_CODES = new Set(['ERR_PENSTOCK_NO_CUDA', 'CUDA_ERROR_NO_DEVICE']);

/** `--rows K/N`: shard K of N, K < N. */
function parseRows(text: string): { index: number; count: number } {
  const m = /^(\d+)\/(\d+)$/.exec(text);
  const index = m ? Number(m[1]) : NaN;
  const count = m ? Number(m[2]) : NaN;
  if (!m || !Number.isSafeInteger(index) || !Number.isSafeInteger(count) || count < 1 || index >= count)
    throw new ArgError(`--rows must be K/N, shard K of N counted from 0 (K < N), got '${text}'`);
  return { index, count };
}

/** The load's options from the command line; a bad combination throws ArgError. */
export function loadOptions(values: ParsedLine['values']): LoadTensorsOptions {
  const target = parseTarget(values);
  if (values.pinned && !target.host) throw new ArgError('--pinned goes with --host');
  if (values.prefix !== undefined && values.names !== undefined) throw new ArgError('--prefix and --names exclude each other');
  const opts: LoadTensorsOptions = {};
  if (target.host) opts.host = values.pinned ? 'pinned' : true;
  if (target.device !== undefined) opts.device = target.device;
  if (typeof values.prefix === 'string') opts.filter = { prefix: values.prefix };
  if (typeof values.names === 'string') opts.filter = values.names.split(',').filter((s) => s.length > 0);
  if (typeof values.rows === 'string') opts.rows = parseRows(values.rows);
  const openSource = sourceOpener(values);
  if (openSource) opts.openSource = openSource;
  return opts;
}

/** Runs `penstock load`; resolves to the exit status. */
export async function runLoadCli({ values, positionals }: ParsedLine): Promise<number> {
  if (positionals.length === 0) throw new ArgError('no path given');
  const opts = loadOptions(values);
  const target = opts.host ? 'host memory' : `GPU ${opts.device ?? 0}`;
  const bar = new ProgressBar({ label: `loading into ${target}`, total: 0, enabled: progressWanted(values) });
  opts.onProgress = (done, total) => bar.update(done, total);
  let set;
  try {
    set = await loadTensors(positionals.length === 1 ? positionals[0]! : [...positionals], opts);
  } catch (e) {
    const code = (e as { code?: string }).code;
    if (opts.host || !code || !NO_GPU_CODES.has(code)) throw e;
    process.stderr.write(`penstock load: ${describeError(e)}\nhint: add --host to load into host memory instead\n`);
    return EXIT.failure;
  } finally {
    bar.finish();
  }
  using loaded = set;
  let checks: TensorCheck[] | undefined;
  if (values.verify) checks = await verifyTensorSet(loaded, opts.openSource ? { openSource: opts.openSource } : {});
  const mismatches = checks?.filter((c) => !c.match) ?? [];
  const routes = loaded.routeTotals();
  const fallbacks = loaded.files.flatMap((f) => f.fallbacks.map((r) => ({ path: f.path, ...r })));
  const gbps = loaded.seconds > 0 ? loaded.bytes / loaded.seconds / 1e9 : 0;
  const place = loaded.place.kind === 'device' ? `GPU ${loaded.place.device}` : loaded.place.pinned ? 'pinned host memory' : 'host memory';
  if (values.json) {
    const bySha = new Map(checks?.map((c) => [c.name, c]) ?? []);
    const report = {
      target: place,
      bytes: loaded.bytes,
      seconds: loaded.seconds,
      gbps,
      tensorCount: loaded.size,
      tensors: loaded.tensors.map((t) => {
        const c = bySha.get(t.name);
        return { name: t.name, dtype: t.dtype, shape: t.shape, bytes: t.byteLength, ...(c ? { sha256: c.sha256, fileSha256: c.fileSha256, match: c.match } : {}) };
      }),
      routes,
      files: loaded.files,
      fallbacks,
      ...(checks ? { verified: mismatches.length === 0, mismatches: mismatches.map((c) => c.name) } : {}),
    };
    process.stdout.write(terminalJson(report) + '\n');
  } else {
    const out: string[] = [];
    out.push(`Loaded ${loaded.size} tensors, ${loaded.bytes} bytes from ${loaded.files.length} file(s) into ${place}`);
    out.push(`Seconds: ${loaded.seconds.toFixed(4)}  Throughput: ${gbps.toFixed(2)} GB/s`);
    const r = Object.entries(routes).map(([k, c]) => `${k} (${c.ops} ops, ${c.bytes} bytes)`);
    out.push(`Routes: ${r.length ? r.join(', ') : 'none (nothing to read)'}`);
    for (const f of fallbacks)
      out.push(`${isRouteReason(f) ? 'Why not GPUDirect Storage' : 'Fell back'} (${terminalText(f.path)}): [${f.code}] ${terminalText(f.message)}`);
    if (checks)
      out.push(
        mismatches.length === 0
          ? `Verified: all ${checks.length} tensors match their files (sha256)`
          : `Verified: MISMATCH in ${mismatches.length} tensor(s): ${mismatches.slice(0, 10).map((c) => terminalText(c.name)).join(', ')}`,
      );
    process.stdout.write(out.join('\n') + '\n');
  }
  return mismatches.length > 0 ? EXIT.checkFailed : EXIT.ok;
}
