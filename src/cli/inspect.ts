/**
 * `penstock inspect PATH... [--json] [--anonymous]`: the tensors of a checkpoint (name, dtype,
 * shape, bytes) and totals, from the headers alone (no data is read, no GPU is used).
 */
import { formatSize } from '../settings/config.js';
import { closeCheckpoint, describeCheckpoint } from '../tensors/checkpoint.js';
import { terminalJson, terminalText } from '../vocabulary/terminal-text.js';
import { ArgError } from './kit/args.js';
import type { ParsedLine } from './kit/command.js';
import { EXIT } from './common.js';
import { sourceOpener } from './sources.js';

/** Runs `penstock inspect`; resolves to the exit status. */
export async function runInspectCli({ values, positionals }: ParsedLine): Promise<number> {
  if (positionals.length === 0) throw new ArgError('no path given');
  const cp = await describeCheckpoint(positionals.length === 1 ? positionals[0]! : [...positionals], { openSource: sourceOpener(values) });
  await closeCheckpoint(cp);
  const tensors = cp.files.flatMap((f) => f.tensors.map((t) => ({ name: t.name, dtype: t.dtype, shape: t.shape, bytes: t.byteLength, file: f.path })));
  const bytes = tensors.reduce((a, t) => a + t.bytes, 0);
  const byDtype: Record<string, { tensors: number; bytes: number }> = {};
  for (const t of tensors) {
    const d = (byDtype[t.dtype] ??= { tensors: 0, bytes: 0 });
    d.tensors++;
    d.bytes += t.bytes;
  }
  const files = cp.files.map((f) => ({ path: f.path, format: f.format, size: f.size, dataStart: f.dataStart, tensors: f.tensors.length, ...(f.metadata ? { metadata: f.metadata } : {}) }));
  if (values.json) {
    const report = { files, tensors, totals: { files: files.length, tensors: tensors.length, bytes, byDtype }, ...(cp.index ? { index: cp.index } : {}) };
    process.stdout.write(terminalJson(report) + '\n');
    return EXIT.ok;
  }
  // Names come from the file: escaped, so that nothing in them can act on the terminal.
  const shown = tensors.map((t) => ({ ...t, name: terminalText(t.name) }));
  const nameWidth = Math.min(60, Math.max(4, ...shown.map((t) => t.name.length)));
  const lines = shown.map((t) => `${t.name.padEnd(nameWidth)}  ${t.dtype.padEnd(11)}  ${`[${t.shape.join(', ')}]`.padEnd(18)}  ${String(t.bytes).padStart(12)}`);
  const out = [`${'name'.padEnd(nameWidth)}  ${'dtype'.padEnd(11)}  ${'shape'.padEnd(18)}  ${'bytes'.padStart(12)}`, ...lines];
  for (const f of files) out.push(`file: ${terminalText(f.path)} (${f.format}, ${f.tensors} tensors, data from byte ${f.dataStart})`);
  const dt = Object.entries(byDtype).map(([d, c]) => `${terminalText(d)} ${c.tensors}`).join(', ');
  out.push(`total: ${tensors.length} tensors, ${bytes} bytes (${formatSize(bytes)}) in ${files.length} file(s)${dt ? `; ${dt}` : ''}`);
  process.stdout.write(out.join('\n') + '\n');
  return EXIT.ok;
}
