/**
 * `penstock bench s3://…|http(s)://…`: throughput of remote reads into host or GPU memory, with
 * the client's CPU seconds per GB and the requests and retries behind every number.
 */
import fs from 'node:fs';
import { ArgError, parseIntArg, parseIntList, parseSizeArg, parseTarget } from '../kit/args.js';
import type { ParsedLine } from '../kit/command.js';
import { terminalJson, terminalText } from '../../vocabulary/terminal-text.js';
import { formatCpu, formatGBps, formatSize, textTable } from '../kit/format.js';
import { median } from './stats.js';
import { DeviceBuffer } from '../../memory/device-buffer.js';
import type { Memory } from '../../engine/file.js';
import { hasGpu } from '../../addon/runtime.js';
import { openRemote, type OpenRemoteOptions, type RemoteObject } from '../../sources/remote/source.js';
import { remoteSettings } from '../../sources/remote/settings.js';
import { isRemoteUrl } from '../../sources/remote/url.js';

/** One measured configuration. */
export interface RemoteMeasurement {
  concurrency: number;
  rangeSize: number;
  bytes: number;
  /** GB/s (1e9 bytes) of each timed repeat. */
  gbps: number[];
  medianGBps: number;
  /** Client process CPU (user + system, every thread) per GB moved. */
  cpuSecondsPerGB: number;
  requests: number;
  retries: number;
}

/**
 * Reads `bytes` of `obj` into `target` `repeat` times (after one untimed read) and measures each.
 * The object must already be open with the concurrency and range size to be measured.
 */
export async function measureRemoteRead(obj: RemoteObject, target: Memory, bytes: number, repeat: number): Promise<Omit<RemoteMeasurement, 'concurrency' | 'rangeSize'>> {
  await obj.read(target, { size: bytes });
  const before = obj.stats().routes;
  const gbps: number[] = [];
  let cpu = 0;
  for (let i = 0; i < repeat; i++) {
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    const n = await obj.read(target, { size: bytes });
    const s = (performance.now() - t0) / 1e3;
    const c = process.cpuUsage(c0);
    cpu += (c.user + c.system) / 1e6;
    gbps.push(n / s / 1e9);
  }
  const after = obj.stats().routes;
  const route = target instanceof DeviceBuffer ? 'remote-device' : 'remote-host';
  return {
    bytes, gbps, medianGBps: median(gbps), cpuSecondsPerGB: cpu / ((bytes * repeat) / 1e9),
    requests: after[route].requests - before[route].requests, retries: after[route].retries - before[route].retries,
  };
}

/** Options of the file benchmark only. */
const FILE_ONLY = ['op', 'threads', 'task-size', 'cold', 'drop-caches', 'fsync', 'dir'] as const;

/** Runs `penstock bench URL …`; resolves to the exit status. */
export async function runRemoteBenchCli({ values: v, positionals }: ParsedLine): Promise<number> {
  const str = (name: string) => (typeof v[name] === 'string' ? (v[name] as string) : undefined);
  for (const name of FILE_ONLY) if (v[name] !== undefined) throw new ArgError(`--${name} applies to files only, not to s3://, http:// or https:// URLs`);
  if (positionals.length !== 1 || !isRemoteUrl(positionals[0])) throw new ArgError('expected one s3://, http:// or https:// URL');
  const url = positionals[0];
  const t = parseTarget(v);
  const target: 'device' | 'host' = t.host || (t.device === undefined && !hasGpu()) ? 'host' : 'device';
  const device = t.device ?? 0;
  const sizeLimit = str('size') === undefined ? undefined : parseSizeArg(str('size')!, '--size');
  const repeat = str('repeat') === undefined ? 3 : parseIntArg(str('repeat')!, '--repeat', 1, 1000);
  const concurrencies: (number | undefined)[] = str('concurrency') === undefined ? [undefined] : parseIntList(str('concurrency')!, '--concurrency', 1, 1024);
  const base: OpenRemoteOptions = {
    ...(v.anonymous ? { anonymous: true } : {}),
    ...(str('range-size') ? { remoteRangeSize: parseSizeArg(str('range-size')!, '--range-size') } : {}),
  };
  const results: RemoteMeasurement[] = [];
  let name = url;
  for (const c of concurrencies) {
    await using obj = await openRemote(url, { ...base, ...(c ? { remoteConcurrency: c } : {}) });
    name = obj.name;
    const total = await obj.size();
    const bytes = sizeLimit === undefined ? total : Math.min(total, sizeLimit);
    const { remoteConcurrency, remoteRangeSize } = remoteSettings({ ...base, ...(c ? { remoteConcurrency: c } : {}) });
    const settings = { concurrency: remoteConcurrency, rangeSize: remoteRangeSize };
    const memory: Memory = target === 'device' ? DeviceBuffer.alloc(bytes, { device }) : Buffer.allocUnsafeSlow(bytes);
    try {
      results.push({ ...settings, ...(await measureRemoteRead(obj, memory, bytes, repeat)) });
    } finally {
      if (memory instanceof DeviceBuffer) memory.free();
    }
  }
  const json = `${terminalJson({ url: name, target: `remote-${target}`, results })}\n`;
  if (str('out') !== undefined) fs.writeFileSync(str('out')!, json);
  if (v.json) {
    process.stdout.write(json);
    return 0;
  }
  process.stdout.write(`${terminalText(name)} → ${target} memory (route remote-${target}), ${repeat} timed repeats after one untimed read\n\n`);
  process.stdout.write(
    textTable(
      ['concurrency', 'range', 'size', 'GB/s (median)', 'min', 'max', 'CPU s/GB', 'requests', 'retries'],
      results.map((r) => [String(r.concurrency), formatSize(r.rangeSize), formatSize(r.bytes), formatGBps(r.medianGBps), formatGBps(Math.min(...r.gbps)), formatGBps(Math.max(...r.gbps)), formatCpu(r.cpuSecondsPerGB), String(r.requests), String(r.retries)]),
      ['right', 'right', 'right', 'right', 'right', 'right', 'right', 'right', 'right'],
    ),
  );
  return 0;
}
