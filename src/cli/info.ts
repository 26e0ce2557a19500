/** `penstock info`: what was found at run time. */
import { parseArgs } from 'node:util';
import { deviceCount, deviceInfo, getConfig, runtimeInfo } from '../index.js';

export async function runInfo(argv: string[]): Promise<number> {
  const { values } = parseArgs({ args: argv, options: { json: { type: 'boolean', default: false } } });
  const rt = runtimeInfo();
  const devices = Array.from({ length: deviceCount() }, (_, i) => deviceInfo(i));
  const report = { settings: getConfig(), ...rt, devices };
  if (values.json) {
    process.stdout.write(JSON.stringify(report, null, 2) + '\n');
    return 0;
  }
  const c = rt.cuda;
  process.stdout.write(
    `CUDA driver: ${c.initialized ? `${c.resolvedPath ?? c.path}, version ${c.driverVersion}, ${c.deviceCount} GPU(s)` : `not usable (${c.error ?? c.initError?.code})`}\n`,
  );
  for (const d of devices) process.stdout.write(`  GPU ${d.ordinal}: ${d.name}, ${(d.totalMemory / 2 ** 30).toFixed(1)} GiB, PCI ${d.pciBusId}\n`);
  const f = rt.cufile;
  process.stdout.write(
    `cuFile: ${f.loaded ? `${f.resolvedPath ?? f.path}, version ${f.version ?? '?'}, driver ${f.driverOpen ? 'open' : `not open (${f.driverError?.code ?? 'no GPU'})`}` : `not loaded (${f.error})`}\n`,
  );
  process.stdout.write(`threads: ${rt.threads}, pinned bytes held: ${rt.pinnedBytes}\n`);
  process.stdout.write(`settings: ${JSON.stringify(getConfig())}\n`);
  return 0;
}
