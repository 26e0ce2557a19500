/**
 * The probe, run in a process of its own by `penstock doctor --probe`: it reads the start of a
 * file into GPU memory through penstock and prints the measured route as one JSON line. It is a
 * separate process because cuFile can crash inside handle registration on a misconfigured
 * system, and that must not take the doctor down with it.
 *
 * Argument: JSON `{ "path": string, "bytes": number, "offset": number, "targetOffset": number }`:
 * read at most `bytes` from `offset` into the GPU buffer at `targetOffset`. The doctor creates and removes the scratch file of a directory probe itself.
 */
import { DeviceBuffer } from '../memory/device-buffer.js';
import { getConfig, runtimeInfo } from '../engine/process.js';
import { hasGpu } from '../addon/runtime.js';
import { open } from '../engine/file.js';
import { ROUTES, type Route, type RouteCounters } from '../engine/stats.js';
import { PROBE_MARK, type ProbeResult } from './types.js';

function emit(result: ProbeResult): void {
  process.stdout.write(PROBE_MARK + JSON.stringify(result) + '\n');
}

async function measure(file: string, limit: number, offset: number, targetOffset: number): Promise<ProbeResult> {
  const f = await open(file, 'r');
  try {
    const size = Math.max(0, Math.min((await f.size()) - offset, limit));
    const threshold = getConfig().gdsThreshold;
    if (size < threshold)
      return {
        status: 'skipped',
        message: `the file holds ${size} bytes, under penstock's gdsThreshold (${threshold}): such reads are staged without asking cuFile, so they show nothing`,
      };
    using buf = DeviceBuffer.alloc(size + targetOffset);
    const t0 = process.hrtime.bigint();
    const bytes = await f.read(buf, { size, fileOffset: offset, targetOffset });
    const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
    const routes: Partial<Record<Route, RouteCounters>> = {};
    let route: Route | undefined;
    const all = f.stats().routes;
    for (const r of ROUTES) {
      if (all[r].operations === 0) continue;
      routes[r] = all[r];
      if (!route || all[r].bytes > all[route].bytes) route = r;
    }
    const reason = f.route.reason;
    const cufile = runtimeInfo().cufile;
    return {
      status: 'measured',
      message: `read ${bytes} bytes in ${(seconds * 1000).toFixed(1)} ms; cuFile ${cufile.driverOpen ? 'open' : 'not open'}`,
      ...(route ? { route } : {}),
      routes,
      ...(reason ? { reason } : {}),
      bytes,
      seconds,
    };
  } finally {
    await f.close();
  }
}

async function main(): Promise<void> {
  const input = JSON.parse(process.argv[2] ?? '{}') as { path: string; bytes: number; offset?: number; targetOffset?: number };
  if (!hasGpu()) {
    emit({ status: 'skipped', message: 'no GPU: nothing to measure' });
    return;
  }
  try {
    emit(await measure(input.path, input.bytes, input.offset ?? 0, input.targetOffset ?? 0));
  } catch (err) {
    const e = err as { code?: string; message?: string };
    emit({ status: 'failed', message: `${e.code ? `${e.code}: ` : ''}${e.message ?? String(err)}` });
  }
}

await main();
