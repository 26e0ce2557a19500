/**
 * `penstock inspect PATH... [--json]`: the tensors of a checkpoint (name, dtype, shape, bytes)
 * and totals, from the headers alone (no data is read, no GPU is used).
 */
import { parseArgs } from 'node:util';
import { formatSize } from '../settings/config.js';
import { closeCheckpoint, describeCheckpoint } from '../tensors/checkpoint.js';

const USAGE = 'usage: penstock inspect PATH... [--json]   (a .safetensors file, a *.index.json, .npy files)\n';

export async function runInspectCli(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({ args: argv, allowPositionals: true, options: { json: { type: 'boolean', default: false }, help: { type: 'boolean', short: 'h', default: false } } });
  } catch (err) {
    process.stderr.write(`penstock inspect: ${(err as Error).message}\n${USAGE}`);
    return 2;
  }
  const { values, positionals } = parsed;
  if (values.help) {
    process.stdout.write(USAGE);
    return 0;
  }
  if (positionals.length === 0) {
    process.stderr.write(`penstock inspect: no path given\n${USAGE}`);
    return 2;
  }
  const cp = await describeCheckpoint(positionals.length === 1 ? positionals[0]! : positionals);
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
    process.stdout.write(JSON.stringify(report, null, 2) + '\n');
    return 0;
  }
  const nameWidth = Math.min(60, Math.max(4, ...tensors.map((t) => t.name.length)));
  const lines = tensors.map((t) => `${t.name.padEnd(nameWidth)}  ${t.dtype.padEnd(11)}  ${`[${t.shape.join(', ')}]`.padEnd(18)}  ${String(t.bytes).padStart(12)}`);
  process.stdout.write(`${'name'.padEnd(nameWidth)}  ${'dtype'.padEnd(11)}  ${'shape'.padEnd(18)}  ${'bytes'.padStart(12)}\n${lines.join('\n')}${lines.length ? '\n' : ''}`);
  for (const f of files) process.stdout.write(`file: ${f.path} (${f.format}, ${f.tensors} tensors, data from byte ${f.dataStart})\n`);
  const dt = Object.entries(byDtype).map(([d, c]) => `${d} ${c.tensors}`).join(', ');
  process.stdout.write(`total: ${tensors.length} tensors, ${bytes} bytes (${formatSize(bytes)}) in ${files.length} file(s)${dt ? `; ${dt}` : ''}\n`);
  return 0;
}
