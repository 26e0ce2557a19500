/** `penstock info`: what was found at run time, and the settings in force with their sources. */
import { deviceCount, deviceInfo } from '../addon/runtime.js';
import { getConfig, runtimeInfo } from '../engine/process.js';
import type { Settings } from '../settings/config.js';
import { parseCommandLine } from './kit/args.js';
import { defaults, formatSize, readEnvironment, suggest, type EnvironmentProblem } from '../settings/config.js';
import { SETTING_NAMES, SETTINGS_TABLE, SHARED_VARIABLES } from '../settings/table.js';
import { EXIT, EXIT_HELP, painter, runCommand } from './common.js';

/** `penstock info --help`. */
export const INFO_USAGE = `Usage: penstock info [--json]

Shows the CUDA driver, cuFile, the GPUs and every setting in force with where
it came from (default or PENSTOCK_* variable). A variable whose value cannot be
used is reported with its value and makes the exit status 1.

Options:
  --json       the same as JSON
  -h, --help   this text

${EXIT_HELP}`;

/** Runs `penstock info`; resolves to the exit status. */
export function runInfo(argv: string[]): Promise<number> {
  return runCommand('info', async () => {
    const { values } = parseCommandLine({
      args: argv,
      strict: true,
      options: { json: { type: 'boolean', default: false }, help: { type: 'boolean', short: 'h', default: false } },
    });
    if (values.help) {
      process.stdout.write(INFO_USAGE);
      return EXIT.ok;
    }
    const report = gather();
    if (values.json) {
      const { runtime, ...rest } = report;
      process.stdout.write(JSON.stringify({ ...rest, ...runtime }, null, 2) + '\n');
    }
    else printReport(report);
    return report.problems.length ? EXIT.failure : EXIT.ok;
  });
}

interface InfoReport {
  settings: Partial<Settings>;
  /** Where each setting came from: 'default' or the variable's name. */
  sources: Record<string, string>;
  problems: EnvironmentProblem[];
  /** PENSTOCK_* variables that are no setting's but look like one. */
  unknownVariables: { variable: string; suggestion: string }[];
  runtime?: ReturnType<typeof runtimeInfo>;
  runtimeError?: string;
  devices: ReturnType<typeof deviceInfo>[];
}

function gather(): InfoReport {
  const env = readEnvironment();
  const sources: Record<string, string> = {};
  const unusable = new Set(env.problems.map((p) => p.variable));
  const set = (variable: string) => Boolean(process.env[variable]);
  for (const name of SETTING_NAMES) {
    const own = SETTINGS_TABLE[name].variable;
    const shared = SHARED_VARIABLES.find((v) => v.settings.includes(name) && set(v.variable))?.variable;
    const from = [own, shared].filter((v): v is string => v !== undefined && set(v));
    const bad = from.filter((v) => unusable.has(v));
    const used = from.filter((v) => !unusable.has(v));
    sources[name] = bad.length ? `${bad.join(', ')} unusable: see below` : used[0] ?? 'default';
  }
  const known = [...SETTING_NAMES.map((n) => SETTINGS_TABLE[n].variable), ...SHARED_VARIABLES.map((v) => v.variable)];
  const unknownVariables = Object.keys(process.env)
    .filter((k) => k.startsWith('PENSTOCK_') && !known.includes(k))
    .flatMap((variable) => {
      const suggestion = suggest(variable, known);
      return suggestion ? [{ variable, suggestion }] : [];
    });
  const report: InfoReport = { settings: { ...defaults(), ...env.settings }, sources, problems: env.problems, unknownVariables, devices: [] };
  if (env.problems.length) {
    report.runtimeError = 'not examined: the settings from the environment cannot be used';
    return report;
  }
  report.settings = getConfig();
  try {
    report.runtime = runtimeInfo();
    report.devices = Array.from({ length: deviceCount() }, (_, i) => deviceInfo(i));
  } catch (e) {
    const x = e as { code?: string; message?: string };
    report.runtimeError = `${x.code ? `[${x.code}] ` : ''}${x.message ?? String(e)}`;
  }
  return report;
}

function printReport(r: InfoReport): void {
  const out = (s: string) => process.stdout.write(s + '\n');
  const paint = painter(process.stdout);
  const rt = r.runtime;
  if (rt) {
    const c = rt.cuda;
    out(`CUDA driver: ${c.initialized ? `${c.resolvedPath ?? c.path}, version ${c.driverVersion}, ${c.deviceCount} GPU(s)${c.copyBatch ? `, batch copies (${c.copyBatch})` : ''}` : paint('33', `not usable (${c.error ?? c.initError?.code})`)}`);
    for (const d of r.devices) out(`  GPU ${d.ordinal}: ${d.name}, ${(d.totalMemory / 2 ** 30).toFixed(1)} GiB, PCI ${d.pciBusId}`);
    const f = rt.cufile;
    out(`cuFile: ${f.loaded ? `${f.resolvedPath ?? f.path}, version ${f.version ?? '?'}, driver ${f.driverOpen ? 'open' : `not open (${f.driverError?.code ?? 'no GPU'})`}` : paint('33', `not loaded (${f.error})`)}`);
    out(`threads: ${rt.threads}, pinned bytes held: ${rt.pinnedBytes}`);
  } else out(`CUDA driver and cuFile: ${r.runtimeError}`);
  out('settings:');
  const width = Math.max(...SETTING_NAMES.map((n) => n.length));
  for (const name of SETTING_NAMES) {
    const v = r.settings[name];
    const shown = typeof v === 'number' && SETTINGS_TABLE[name].unit === 'bytes' ? formatSize(v) : String(v);
    out(`  ${name.padEnd(width)}  ${shown}${r.sources[name] === 'default' ? '' : `  (${r.sources[name]})`}`);
  }
  for (const p of r.problems) out(paint('31', `problem: [${p.code}] ${p.message}`));
  for (const u of r.unknownVariables) out(paint('33', `note: ${u.variable} is not a penstock variable (did you mean ${u.suggestion}?)`));
}
