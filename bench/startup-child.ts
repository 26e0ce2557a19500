/**
 * One fresh process of `bench:startup`: the steps a first load into a GPU pays, one at a time on
 * the raw addon, each timed from the process's start (performance.timeOrigin): the import, the
 * CUDA driver (dlopen + cuInit), the primary context, the pool, pinned staging per worker, the
 * gather stage, cuFile's driver open, the slab, the data. `--steps` chooses and orders them.
 * Prints one JSON object of milliseconds since process start after each step.
 */
const t = (): number => performance.now();
const marks: Record<string, number> = { start: 0, entered: t() };
const { parseArgs } = await import('node:util');
const { values: o, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    steps: { type: 'string', default: 'import,cuda,context,pool,bounce,gather,cufile,slab,data' },
    bounce: { type: 'string', default: String(8 << 20) },
    threads: { type: 'string', default: '16' },
  },
});
const steps = o.steps!.split(',');
const file = positionals[0];
const { native } = await import('../src/addon/binding.js');
const { currentSettings } = await import('../src/settings/current.js');
marks.addonModule = t();
const n = native();
marks.addonLoaded = t();
let size = 0;
let ptr = 0n;
const threads = Number(o.threads);
const bounce = Number(o.bounce);
for (const step of steps) {
  switch (step) {
    case 'import':
      await import('../src/index.js');
      break;
    case 'cuda':
      n.cudaLoad(currentSettings().cudaLibrary);
      break;
    case 'context':
      n.memGetInfo(0);
      break;
    case 'pool':
      n.setThreads(threads, 50_000, 4);
      break;
    case 'bounce':
      n.devicePrepare(0, bounce, -1, 1 << 20, 0);
      break;
    case 'gather':
      n.devicePrepare(0, bounce, -1, 1 << 20, 64 << 20);
      break;
    case 'cufile': {
      const s = n.cufileLoad(currentSettings().cufileLibrary);
      if (s.loaded) n.cufileDriverOpen(0);
      break;
    }
    case 'slab': {
      const fs = await import('node:fs');
      size = file ? fs.statSync(file).size : 1 << 30;
      ptr = n.deviceAlloc(0, size);
      break;
    }
    case 'data': {
      const { open } = await import('../src/engine/file.js');
      const { DeviceBuffer } = await import('../src/memory/device-buffer.js');
      // Run with PENSTOCK_COMPAT_MODE=on unless cuFile is wanted: wrap() prepares the device.
      const buf = DeviceBuffer.wrap(ptr, size, { device: 0 });
      await using f = await open(file!);
      const r = await f.readRecorded(buf);
      marks.dataBytes = r.bytes;
      break;
    }
    default:
      throw new Error(`unknown step ${step}`);
  }
  marks[step] = t();
}
process.stdout.write(JSON.stringify({ steps, threads, bounce, marks }) + '\n');
