/**
 * One penstock process of `bench:tensors`, library calls only (`loadTensors` into GPU 0).
 *
 *   tensors-child.js FILE --mode fresh [--context inside] [--reference REF.json]
 *   tensors-child.js FILE --mode prepared --repeat N [--reference REF.json]
 *
 * fresh: the process's first load, timed from the process start (performance.timeOrigin). By
 * default the CUDA context is made first (memoryInfo), so that the loader's clock starts where
 * the Python peers start theirs; `--context inside` leaves it to loadTensors. When the tensors
 * are in GPU memory the child writes its ready line to file descriptor 3 (the parent's clock
 * stops there), then checks, then prints one JSON object on stdout.
 * prepared: the GPU is prepared (prepareGpu) and the file loaded once, then N loads are timed (a secondary
 * frame: what a process that already paid its set-up pays again).
 * With --reference, every tensor of the (last) load is hashed from GPU memory and compared with
 * the reference (sha256 of the file's bytes).
 */
const now = (): number => performance.now();
const marks: Record<string, number> = { entered: now() };
const { parseArgs } = await import('node:util');
const fs = await import('node:fs');
const { values: o, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    mode: { type: 'string', default: 'fresh' },
    context: { type: 'string', default: 'first' },
    repeat: { type: 'string', default: '3' },
    reference: { type: 'string' },
  },
});
const file = positionals[0];
if (!file || (o.mode !== 'fresh' && o.mode !== 'prepared')) {
  process.stderr.write('usage: tensors-child.js FILE --mode fresh|prepared [--context first|inside] [--repeat N] [--reference REF.json]\n');
  process.exit(2);
}
const { formatReadyLine } = await import('./ready-line.js');
const p = { ...(await import('../src/index.js')), ...(await import('../src/doctor.js')) };
marks.imported = now();

function ready(r: Record<string, unknown>): void {
  try {
    fs.writeSync(3, formatReadyLine(r));
  } catch {
    // Run by hand, without the parent's descriptor 3: the JSON on stdout says it all.
  }
}

type TensorSet = Awaited<ReturnType<typeof p.loadTensors>>;
function describe(set: TensorSet, loaderS: number) {
  const routes = set.routeTotals();
  const fb = set.files.flatMap((f) => f.fallbacks)[0];
  return { loaderS, penstockSeconds: set.seconds, bytes: set.bytes, tensors: set.size, routes, direct: set.files.some((f) => f.direct), fallback: fb ? `[${fb.code}] ${fb.message}` : undefined };
}

/** Every tensor hashed from GPU memory on worker threads, compared with the reference. */
async function check(set: TensorSet, refPath: string) {
  const { HashPool, compareHashes } = await import('./tensors-hash.js');
  const ref = (JSON.parse(fs.readFileSync(refPath, 'utf8')) as { tensors: Record<string, string> }).tensors;
  const pool = new HashPool();
  const t0 = now();
  try {
    const piece = 64 << 20;
    const jobs: Promise<[string, string]>[] = [];
    for (const t of set.tensors) {
      const s = pool.stream(t.byteLength);
      for (let off = 0; off < t.byteLength; off += piece) {
        const n = Math.min(piece, t.byteLength - off);
        const buf = Buffer.allocUnsafeSlow(n);
        if (t.data instanceof p.DeviceBuffer) await t.data.copyTo(buf, { offset: off, size: n });
        else buf.set(t.data.subarray(off, off + n));
        s.update(buf);
        // Hashing runs behind the copies; keep what waits for it bounded.
        while (pool.backlog > 2 ** 31) await new Promise((r) => setTimeout(r, 5));
      }
      jobs.push(s.digest().then((hex) => [t.name, hex]));
    }
    const got = Object.fromEntries(await Promise.all(jobs));
    const c = compareHashes(got, ref);
    return { compared: c.compared, mismatched: c.mismatched, missing: c.missing, firstBad: c.firstBad, how: 'sha256 of every tensor from GPU memory = the file\'s', seconds: (now() - t0) / 1e3 };
  } finally {
    await pool.close();
  }
}

const out: Record<string, unknown> = { mode: o.mode, file };
try {
  if (!p.hasGpu()) throw new Error(`no usable GPU (${p.runtimeInfo().cuda.error ?? 'no device'})`);
  if (o.mode === 'fresh') {
    if (o.context === 'first') {
      p.memoryInfo(0);
      marks.context = now();
    }
    const t0 = now();
    const set = await p.loadTensors(file, { device: 0 });
    const t1 = now();
    marks.ready = t1;
    ready({ sinceStartS: t1 / 1e3, loaderS: (t1 - t0) / 1e3, ...(marks.context !== undefined ? { contextAtS: marks.context / 1e3 } : {}), importedAtS: marks.imported! / 1e3 });
    out.loads = [describe(set, (t1 - t0) / 1e3)];
    if (o.reference) out.check = await check(set, o.reference);
    set.free();
  } else {
    await p.prepareGpu(0);
    (await p.loadTensors(file, { device: 0 })).free();
    marks.prepared = now();
    const loads = [];
    const n = Number(o.repeat);
    for (let i = 0; i < n; i++) {
      const t0 = now();
      const set = await p.loadTensors(file, { device: 0 });
      const t1 = now();
      loads.push(describe(set, (t1 - t0) / 1e3));
      if (i === n - 1 && o.reference) out.check = await check(set, o.reference);
      set.free();
    }
    out.loads = loads;
  }
  out.ok = true;
} catch (err) {
  out.ok = false;
  out.error = `${(err as { code?: string }).code ?? (err as Error).name}: ${(err as Error).message}`;
}
out.marksS = Object.fromEntries(Object.entries(marks).map(([k, v]) => [k, v / 1e3]));
process.stdout.write(JSON.stringify(out) + '\n');
