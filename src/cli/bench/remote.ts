/**
 * `penstock bench s3://…|http(s)://…`: throughput of remote reads into host or GPU memory, with
 * the client's CPU seconds per GB and the requests and retries behind every number.
 */
import { ArgError, oneOf, parseCommandLine, parseIntArg, parseIntList, parseSizeArg } from '../kit/args.js';
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

const USAGE = `Usage: penstock bench URL [options]

Measures reads of a remote object (s3://bucket/key, http:// or https://, presigned URLs too) into
host or GPU memory. s3:// takes credentials, region and endpoint as the AWS tools do
(AWS_ACCESS_KEY_ID, AWS_PROFILE, AWS_REGION, AWS_ENDPOINT_URL_S3, ~/.aws/credentials, ~/.aws/config).

Options:
  --size SIZE          bytes per read (default: the whole object)
  --target T           device | host (default: device when a GPU is usable, else host)
  --concurrency LIST   ranged GETs in flight, each value its own run: 1,16,64 (default: the setting)
  --range-size SIZE    bytes per ranged GET (default: the setting, 8 MiB)
  --repeat N           timed repeats per configuration (default 3)
  --anonymous          s3:// without signing (public buckets)
  --json               print the results as JSON
  -h, --help           this text
`;

/** Runs `penstock bench URL …`; resolves to the exit status. */
export async function runRemoteBenchCli(argv: string[]): Promise<number> {
  let v: Record<string, string | boolean | undefined>;
  let url: string;
  let target: 'device' | 'host';
  let repeat: number;
  let concurrencies: (number | undefined)[];
  let base: OpenRemoteOptions;
  let sizeLimit: number | undefined;
  try {
    const parsed = parseCommandLine({
      args: argv, allowPositionals: true, strict: true,
      options: {
        size: { type: 'string' }, target: { type: 'string' }, concurrency: { type: 'string' }, 'range-size': { type: 'string' },
        repeat: { type: 'string' }, anonymous: { type: 'boolean' }, json: { type: 'boolean' }, help: { type: 'boolean', short: 'h' },
      },
    });
    v = parsed.values;
    if (v.help) {
      process.stdout.write(USAGE);
      return 0;
    }
    if (parsed.positionals.length !== 1 || !isRemoteUrl(parsed.positionals[0])) throw new ArgError('expected one s3://, http:// or https:// URL');
    url = parsed.positionals[0];
    target = v.target === undefined ? (hasGpu() ? 'device' : 'host') : oneOf(v.target as string, '--target', ['device', 'host'] as const);
    sizeLimit = v.size === undefined ? undefined : parseSizeArg(v.size as string, '--size');
    repeat = v.repeat === undefined ? 3 : parseIntArg(v.repeat as string, '--repeat', 1, 1000);
    concurrencies = v.concurrency === undefined ? [undefined] : parseIntList(v.concurrency as string, '--concurrency', 1, 1024);
    base = { ...(v.anonymous ? { anonymous: true } : {}), ...(v['range-size'] ? { remoteRangeSize: parseSizeArg(v['range-size'] as string, '--range-size') } : {}) };
  } catch (e) {
    if (!(e instanceof ArgError)) throw e;
    process.stderr.write(`penstock bench: ${e.message}\n\n${USAGE}`);
    return 2;
  }
  const results: RemoteMeasurement[] = [];
  let name = url;
  for (const c of concurrencies) {
    await using obj = await openRemote(url, { ...base, ...(c ? { remoteConcurrency: c } : {}) });
    name = obj.name;
    const total = await obj.size();
    const bytes = sizeLimit === undefined ? total : Math.min(total, sizeLimit);
    const { remoteConcurrency, remoteRangeSize } = remoteSettings({ ...base, ...(c ? { remoteConcurrency: c } : {}) });
    const settings = { concurrency: remoteConcurrency, rangeSize: remoteRangeSize };
    const memory: Memory = target === 'device' ? DeviceBuffer.alloc(bytes) : Buffer.allocUnsafeSlow(bytes);
    try {
      results.push({ ...settings, ...(await measureRemoteRead(obj, memory, bytes, repeat)) });
    } finally {
      if (memory instanceof DeviceBuffer) memory.free();
    }
  }
  if (v.json) {
    process.stdout.write(`${JSON.stringify({ url: name, target: `remote-${target}`, results }, null, 2)}\n`);
    return 0;
  }
  process.stdout.write(`${name} → ${target} memory (route remote-${target}), ${repeat} timed repeats after one untimed read\n\n`);
  process.stdout.write(
    textTable(
      ['concurrency', 'range', 'size', 'GB/s (median)', 'min', 'max', 'CPU s/GB', 'requests', 'retries'],
      results.map((r) => [String(r.concurrency), formatSize(r.rangeSize), formatSize(r.bytes), formatGBps(r.medianGBps), formatGBps(Math.min(...r.gbps)), formatGBps(Math.max(...r.gbps)), formatCpu(r.cpuSecondsPerGB), String(r.requests), String(r.retries)]),
      ['right', 'right', 'right', 'right', 'right', 'right', 'right', 'right', 'right'],
    ),
  );
  return 0;
}
