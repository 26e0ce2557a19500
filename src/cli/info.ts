/** `penstock info`: what was found at run time, and the settings in force with their sources. */
import { deviceCount, deviceInfo } from '../addon/runtime.js';
import { getConfig, runtimeInfo } from '../engine/process.js';
import type { Settings } from '../settings/config.js';
import type { ParsedLine } from './kit/command.js';
import { terminalJson, terminalText } from '../vocabulary/terminal-text.js';
import { defaults, formatSize, readEnvironment, suggest, type EnvironmentProblem } from '../settings/config.js';
import { SETTING_NAMES, SETTINGS_TABLE, SHARED_VARIABLES } from '../settings/table.js';
import { EXIT, describeError, painter } from './common.js';

/** Runs `penstock info`; resolves to the exit status. */
export async function runInfo({ values }: ParsedLine): Promise<number> {
  const report = gather();
  if (values.json) {
    const { runtime, ...rest } = report;
    process.stdout.write(terminalJson({ ...rest, ...runtime }) + '\n');
  } else printReport(report);
  return report.problems.length || report.addonError ? EXIT.failure : EXIT.ok;
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
  /** Set when the native addon cannot be loaded: its code and message. */
  addonError?: { code: string; message: string };
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
    report.runtimeError = describeError(e);
    if (x.code === 'ERR_PENSTOCK_ADDON_LOAD') report.addonError = { code: x.code, message: x.message ?? String(e) };
  }
  return report;
}

function printReport(r: InfoReport): void {
  const out = (s: string) => process.stdout.write(s + '\n');
  const paint = painter(process.stdout);
  const rt = r.runtime;
  if (rt) {
    const c = rt.cuda;
    out(`CUDA driver: ${c.initialized ? `${terminalText(String(c.resolvedPath ?? c.path))}, version ${c.driverVersion}, ${c.deviceCount} GPU(s)${c.copyBatch ? `, batch copies (${c.copyBatch})` : ''}` : paint('33', `not usable (${terminalText(String(c.error ?? c.initError?.code))})`)}`);
    for (const d of r.devices) out(`  GPU ${d.ordinal}: ${terminalText(d.name)}, ${(d.totalMemory / 2 ** 30).toFixed(1)} GiB, PCI ${d.pciBusId}`);
    const f = rt.cufile;
    out(`cuFile: ${f.loaded ? `${terminalText(String(f.resolvedPath ?? f.path))}, version ${f.version ?? '?'}, driver ${f.driverOpen ? 'open' : `not open (${f.driverError?.code ?? 'no GPU'})`}` : paint('33', `not loaded (${terminalText(String(f.error))})`)}`);
    out(`threads: ${rt.threads}, pinned bytes held: ${rt.pinnedBytes}`);
  } else if (r.addonError) out(paint('31', `problem: the native addon is not loaded, so no GPU can be used: ${r.runtimeError}`));
  else out(`CUDA driver and cuFile: ${r.runtimeError}`);
  out('settings:');
  const width = Math.max(...SETTING_NAMES.map((n) => n.length));
  for (const name of SETTING_NAMES) {
    const v = r.settings[name];
    const shown = typeof v === 'number' && SETTINGS_TABLE[name].unit === 'bytes' ? formatSize(v) : terminalText(String(v));
    out(`  ${name.padEnd(width)}  ${shown}${r.sources[name] === 'default' ? '' : `  (${r.sources[name]})`}`);
  }
  for (const p of r.problems) out(paint('31', `problem: [${p.code}] ${terminalText(p.message)}`));
  for (const u of r.unknownVariables) out(paint('33', `note: ${terminalText(u.variable)} is not a penstock variable (did you mean ${u.suggestion}?)`));
}
