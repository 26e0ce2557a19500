/**
 * One penstock process of the tensor benchmark: loads a checkpoint into GPU 0 `--repeat` times
 * and prints one JSON object (seconds per load, routes, peak RSS above the process's baseline,
 * GPU memory used beyond the slab). Run by bench/tensors.ts, in a fresh process per cold load.
 */
import { parseArgs } from 'node:util';
import { DeviceBuffer, hasGpu, loadTensors, memoryInfo, runtimeInfo } from '../src/index.js';
import { procStatus, resetPeakRss } from './memory.js';

const { values, positionals } = parseArgs({ allowPositionals: true, options: { repeat: { type: 'string', default: '1' }, host: { type: 'boolean', default: false } } });
const repeat = Number(values.repeat);
if (!values.host && !hasGpu()) {
  process.stdout.write(JSON.stringify({ error: `no usable GPU (${runtimeInfo().cuda.error ?? 'no device'})` }) + '\n');
  process.exit(0);
}
const input = positionals.length === 1 ? positionals[0]! : positionals;
const rawBaseline = procStatus().vmRss ?? 0;
// The baseline is the process with penstock ready on the GPU (context, pinned staging buffers),
// as Python's is with torch's CUDA context: what a load adds is measured above it.
if (!values.host) DeviceBuffer.alloc(1, { device: 0 }).free();
const baseline = procStatus().vmRss ?? 0;
const runs = [];
for (let i = 0; i < repeat; i++) {
  const peakReset = resetPeakRss();
  const free0 = values.host ? 0 : memoryInfo(0).free;
  const set = await loadTensors(input, values.host ? { host: true } : { device: 0 });
  const used = values.host ? 0 : free0 - memoryInfo(0).free;
  const slabBytes = (set.slab as { byteLength: number }).byteLength;
  const st = procStatus();
  runs.push({
    seconds: set.seconds,
    bytes: set.bytes,
    tensors: set.size,
    routes: set.routeTotals(),
    fallback: set.files.find((f) => f.fallback)?.fallback,
    direct: set.files.some((f) => f.direct),
    slabBytes,
    ...(values.host ? {} : { gpuBytesUsed: used, gpuBytesBeyondSlab: used - slabBytes }),
    peakRssAboveBaseline: peakReset && st.vmHwm !== undefined ? st.vmHwm - baseline : undefined,
  });
  set.free();
}
process.stdout.write(JSON.stringify({ baselineRss: baseline, baselineRssBeforeGpu: rawBaseline, runs }) + '\n');
