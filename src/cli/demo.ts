/**
 * `penstock demo` (what `npm start` runs): writes a small model-shaped safetensors checkpoint into
 * a private temporary directory, loads it into GPU memory (host memory where no GPU is usable),
 * verifies every tensor against the file, and prints the route, why it was not the direct path,
 * and the time from process start. The directory is removed afterwards, also when stopped.
 */
import { constants as bufferConstants } from 'node:buffer';
import { performance } from 'node:perf_hooks';
import { cudaUnavailableReason, hasGpu } from '../addon/runtime.js';
import { formatSize } from '../settings/sizes.js';
import { loadTensors, type LoadTensorsOptions } from '../tensors/loader.js';
import { verifyTensorSet } from '../tensors/verify.js';
import { PenstockError } from '../vocabulary/errors.js';
import { terminalText } from '../vocabulary/terminal-text.js';
import { isRouteReason } from '../vocabulary/reasons.js';
import { ArgError, parseSizeArg, parseTarget } from './kit/args.js';
import type { ParsedLine } from './kit/command.js';
import { ProgressBar } from './kit/progress.js';
import { onEarlyEnd } from './kit/process-end.js';
import { EXIT, painter, progressWanted } from './common.js';
import { DEMO_DEFAULT_SIZE, demoModel, writeDemoCheckpoint } from './demo-checkpoint.js';
import { createPrivateFile } from './private-file.js';

const MIN_SIZE = 1 << 20;

/** Seconds with three significant figures. */
function secs(ms: number): string {
  const s = ms / 1e3;
  return `${s >= 10 ? s.toFixed(1) : s >= 1 ? s.toFixed(2) : s.toFixed(3)} s`;
}

/** Runs `penstock demo`; resolves to the exit status. */
export async function runDemo({ values }: ParsedLine): Promise<number> {
  // Everything before this line (Node.js start-up, loading penstock) is part of what a program pays.
  const started = performance.now();
  const size = parseSizeArg(typeof values.size === 'string' ? values.size : DEMO_DEFAULT_SIZE, '--size', MIN_SIZE);
  const target = parseTarget(values);
  const out = (s: string) => process.stdout.write(s + '\n');
  const paint = painter(process.stdout);
  const progress = progressWanted(values);
  const gpu = !target.host && hasGpu();
  const discovered = performance.now();
  if (target.device !== undefined && !gpu)
    throw new PenstockError('ERR_PENSTOCK_NO_CUDA', `No usable GPU: ${cudaUnavailableReason() ?? 'no device'}; run the demo with --host, or without --device`);
  const model = demoModel(size);
  if (model.bytes > bufferConstants.MAX_LENGTH && !gpu)
    throw new ArgError(`in host memory the demo checkpoint must stay under ${formatSize(bufferConstants.MAX_LENGTH)}; use a smaller --size`);
  const sample = createPrivateFile('penstock-demo-', 'model.safetensors');
  const forget = onEarlyEnd(() => sample.remove());
  try {
    const w0 = performance.now();
    const bar = new ProgressBar({ label: 'writing the checkpoint', total: model.bytes, enabled: progress });
    try {
      await writeDemoCheckpoint(sample.fd, model, bar.update);
    } finally {
      bar.finish();
      sample.closeFd();
    }
    const writeMs = performance.now() - w0;
    const dtypes = [...new Set(model.tensors.map((t) => t.dtype))].join(' and ');
    out(`Checkpoint: ${model.tensors.length} tensors (${dtypes}), ${formatSize(model.bytes)}: a ${model.layers}-layer model of hidden size ${model.hidden}`);
    out(`  written to ${terminalText(sample.path)} in ${secs(writeMs)} (removed at the end)`);
    const place = gpu ? `GPU ${target.device ?? 0} memory` : 'host memory';
    out(`Target: ${place}${gpu ? '' : target.host ? ' (--host)' : ` (no usable GPU here: ${terminalText(cudaUnavailableReason() ?? 'no device')})`}`);
    const opts: LoadTensorsOptions = gpu ? { device: target.device ?? 0 } : { host: true };
    const loadBar = new ProgressBar({ label: `loading into ${place}`, total: model.bytes, enabled: progress });
    opts.onProgress = (done, total) => loadBar.update(done, total);
    const l0 = performance.now();
    let set;
    try {
      set = await loadTensors(sample.path, opts);
    } finally {
      loadBar.finish();
    }
    using loaded = set;
    const loadMs = performance.now() - l0;
    const routes = Object.entries(loaded.routeTotals()).map(([r, c]) => `${r} (${c.ops} ops, ${c.bytes} bytes)`);
    out(`Loaded: ${loaded.size} tensors, ${loaded.bytes} bytes in ${secs(loadMs)} (${(loaded.bytes / (loadMs / 1e3) / 1e9).toFixed(2)} GB/s)`);
    out(`Route: ${routes.join(', ') || 'none'}`);
    const fallback = loaded.files.flatMap((f) => f.fallbacks).find(isRouteReason);
    if (fallback) out(`Why not GPUDirect Storage: [${fallback.code}] ${terminalText(fallback.message)}`);
    else if (!gpu) out('Why not GPUDirect Storage: the target is host memory (the direct path reads into GPU memory only)');
    // The frame a program pays: from process start to tensors in memory, without the time the demo
    // spent writing its own checkpoint (a real one is already on disk).
    const paid = performance.now() - writeMs;
    out(`Time: ${secs(paid)} from process start to the tensors in ${place} (start-up ${secs(started)}, ${gpu ? 'GPU discovery' : 'driver probe'} ${secs(discovered - started)}, load ${secs(loadMs)}; writing the checkpoint not counted)`);
    const v0 = performance.now();
    const checks = await verifyTensorSet(loaded);
    const bad = checks.filter((c) => !c.match);
    const verifyMs = performance.now() - v0;
    out(
      bad.length === 0
        ? `Verified: ${paint('32', `all ${checks.length} tensors match the file`)} (sha256 of each tensor in memory and in the file, ${secs(verifyMs)})`
        : `Verified: ${paint('31', `${bad.length} of ${checks.length} tensors differ from the file`)}: ${bad.slice(0, 5).map((c) => terminalText(c.name)).join(', ')}`,
    );
    return bad.length === 0 ? EXIT.ok : EXIT.checkFailed;
  } finally {
    forget();
    sample.remove();
  }
}
