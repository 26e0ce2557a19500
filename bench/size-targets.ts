/** The targets for every size: mid-size reads at the pool's width, small-read latency, batched reads. */
import { formatMicros, formatRatio, formatSize } from '../src/cli/kit/format.js';
import type { Row, SuiteReport, TargetRow } from './context.js';

const KiB = 1024;
const MiB = KiB * KiB;

function row(r: SuiteReport, section: string, methodId: string, size: number, target?: string): Row | undefined {
  return r.results.find((x) => x.section === section && x.methodId === methodId && x.size === size && x.state === 'warm' && !x.error && (!target || x.target === target));
}

function check(name: string, want: string, value: number | undefined, ok: (v: number) => boolean, show: (v: number) => string, why: string): TargetRow {
  if (value === undefined || !Number.isFinite(value)) return { name, want, measured: '—', status: 'not measured', note: why };
  return { name, want, measured: show(value), status: ok(value) ? 'pass' : 'miss' };
}

const gbps = (v: number) => `${v.toFixed(2)} GB/s`;

/** The rows for the targets of reads at every size, from this run's results. */
export function sizeTargets(r: SuiteReport): TargetRow[] {
  const gpu = r.machine.gpu ? 'no result' : 'no GPU';
  const t: TargetRow[] = [];
  for (const [size, want] of [[MiB, 15], [16 * MiB, 35], [256 * MiB, 45]] as const) {
    const d = row(r, 'device-read', 'penstock-device-read', size);
    const c = check(`warm ${formatSize(size)} → GPU`, `≥ ${want} GB/s`, d?.medianGBps, (v) => v >= want, gbps, gpu);
    // The default row reads one range again and again, so it runs from kept pages after its
    // second read; the staged row says what a range read for the first time gets.
    const staged = row(r, 'device-read', 'penstock-device-read-staged', size);
    if (d && staged) c.note = `path ${d.path}; every read staged (keptPagesMax 0): ${gbps(staged.medianGBps!)}`;
    t.push(c);
  }
  const h16 = row(r, 'host-read', 'penstock-host-read', 16 * MiB);
  const fh16 = row(r, 'host-read', 'filehandle-concurrent', 16 * MiB);
  t.push(check('warm 16 MiB → host vs 16 × FileHandle.read', '≥ 1.3×', h16 && fh16 ? h16.medianGBps! / fh16.medianGBps! : undefined, (v) => v >= 1.3, formatRatio, 'no result'));
  // Every size: penstock against the best plain-Node way measured at that size.
  const plain = ['readfile', 'fs-read-loop', 'filehandle-concurrent'];
  let worst: { ratio: number; size: number } | undefined;
  for (const x of r.results.filter((y) => y.section === 'host-read' && y.methodId === 'penstock-host-read' && !y.error)) {
    const best = Math.max(...r.results.filter((y) => y.section === 'host-read' && y.size === x.size && plain.includes(y.methodId) && !y.error).map((y) => y.medianGBps ?? 0));
    if (best > 0 && (!worst || x.medianGBps! / best < worst.ratio)) worst = { ratio: x.medianGBps! / best, size: x.size };
  }
  const everySize = check('warm → host, every size, vs the best plain-Node way', '≥ 1× (the worst size)', worst?.ratio, (v) => v >= 1, formatRatio, 'no result');
  if (worst) everySize.note = `worst at ${formatSize(worst.size)}`;
  t.push(everySize);
  const lat = (target: string, method: string) => r.latency.find((l) => l.target === target && l.size === 4096 && l.method === method);
  const dl = lat('device', 'penstock');
  t.push(check('4 KiB read into the GPU, p50', '≤ 25 µs', dl?.p50Us, (v) => v <= 25, formatMicros, gpu));
  const hl = lat('host', 'penstock');
  const fl = lat('host', 'FileHandle.read');
  const host = check('4 KiB read into host memory, p50, vs FileHandle.read', '≤ 1× its p50', hl && fl ? hl.p50Us / fl.p50Us : undefined, (v) => v <= 1, formatRatio, 'no result');
  if (hl && fl) host.note = `${formatMicros(hl.p50Us)} against ${formatMicros(fl.p50Us)}`;
  t.push(host);
  const bytes = 10_000 * 4096;
  const b = row(r, 'batch', 'penstock-batch', bytes, 'device');
  const all = row(r, 'batch', 'penstock-promise-all-single', bytes, 'device');
  t.push(check('batched random 4 KiB → GPU', '≥ 1.5 M ranges/s', b?.rangesPerSecond, (v) => v >= 1.5e6, (v) => `${(v / 1e6).toFixed(2)} M/s`, gpu));
  t.push(check('batched random 4 KiB → GPU vs Promise.all of single reads', '≥ 10×', b && all ? b.medianGBps! / all.medianGBps! : undefined, (v) => v >= 10, formatRatio, gpu));
  const scattered = row(r, 'batch', 'penstock-batch-scattered', bytes, 'device');
  if (scattered) {
    const note = 'each range at every other slot of the target, shuffled: no two adjacent, so a copy per range';
    t.push({ ...check('batched random 4 KiB → GPU, scattered targets', 'reported', scattered.rangesPerSecond, () => true, (v) => `${(v / 1e6).toFixed(2)} M/s`, gpu), note });
  }
  const bh = row(r, 'batch', 'penstock-batch', bytes, 'host');
  const ah = row(r, 'batch', 'penstock-promise-all-single', bytes, 'host');
  const fh = row(r, 'batch', 'filehandle-promise-all', bytes, 'host');
  if (bh) {
    const note = `${(bh.rangesPerSecond! / 1e6).toFixed(2)} M ranges/s; Promise.all of single penstock reads ${ah ? (ah.rangesPerSecond! / 1e6).toFixed(2) : '—'} M/s, of FileHandle.read ${fh ? (fh.rangesPerSecond! / 1e6).toFixed(2) : '—'} M/s`;
    t.push({ ...check('batched random 4 KiB → host vs Promise.all of FileHandle.read', 'reported', fh ? bh.medianGBps! / fh.medianGBps! : undefined, () => true, formatRatio, 'no result'), note });
  }
  return t;
}
