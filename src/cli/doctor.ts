/**
 * `penstock doctor [PATH...] [--json] [--probe] [--require-gds]`: which route each file's device
 * reads take here, and why. Exit status: 0 once a verdict is established (whatever the route),
 * 1 when the doctor itself fails, 3 with --require-gds when a path would not get the direct path.
 */
import { parseArgs } from 'node:util';
import { diagnose, render } from '../doctor/index.js';

const USAGE = 'usage: penstock doctor [PATH...] [--json] [--probe] [--require-gds]\n';

export async function runDoctorCli(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        json: { type: 'boolean', default: false },
        probe: { type: 'boolean', default: false },
        'require-gds': { type: 'boolean', default: false },
        help: { type: 'boolean', short: 'h', default: false },
      },
    });
  } catch (err) {
    process.stderr.write(`penstock doctor: ${(err as Error).message}\n${USAGE}`);
    return 1;
  }
  const { values, positionals } = parsed;
  if (values.help) {
    process.stdout.write(USAGE);
    return 0;
  }
  let report;
  try {
    report = await diagnose(positionals, {
      probe: values.probe,
      ...(process.env.PENSTOCK_DOCTOR_ROOT ? { root: process.env.PENSTOCK_DOCTOR_ROOT } : {}),
    });
  } catch (err) {
    const e = err as { code?: string; message?: string; stack?: string };
    process.stderr.write(`penstock doctor failed: ${e.code ? `[${e.code}] ` : ''}${e.message ?? String(err)}\n`);
    return 1;
  }
  if (values.json) process.stdout.write(JSON.stringify(report, null, 2) + '\n');
  else process.stdout.write(render(report, { colour: Boolean(process.stdout.isTTY) && !process.env.NO_COLOR }));
  return values['require-gds'] && !report.allDirect ? 3 : 0;
}
