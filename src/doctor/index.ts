/**
 * `diagnose()`: which route each file's device reads will take on this machine, and why, with
 * what to change for the direct path. `penstock doctor` prints the same report.
 */
import fs from 'node:fs';
import path from 'node:path';
import { liveFacts } from './facts.js';
import { pathChecks } from './path-checks.js';
import { inspectPath } from './paths.js';
import { inspectPlatform } from './platform.js';
import { predict, verdictLine } from './predict.js';
import { predictShape, shapeLine } from './shape.js';
import { judgeProbe, runProbe } from './probe.js';
import { SysRoot } from '../system/sysfs.js';
import { ROUTE_RANK } from '../vocabulary/reasons.js';
import { checkLength } from '../vocabulary/validate.js';
import type { Route } from '../engine/stats.js';
import type { DiagnoseOptions, DoctorReport, PathReport, PredictedRoute, Prediction, ProbeResult } from './types.js';

export type {
  Check, CheckStatus, DiagnoseOptions, DoctorReport, Finding, PathReport, PlatformFacts, PredictedRoute, Prediction, ProbeResult, ShapePrediction,
} from './types.js';
export { render, renderGdscheck, type RenderOptions } from './report.js';
export { readGdscheck, type GdscheckReport, type GdscheckParsed } from './gdscheck.js';

const DEFAULT_PROBE_BYTES = 4 * 1024 * 1024;
const DEFAULT_PROBE_TIMEOUT_MS = 60_000;

function absolute(root: SysRoot, given: string): string {
  const abs = path.resolve(given);
  if (!root.live) return abs;
  // Mount points are matched against the real location, not a symlink's.
  try {
    return fs.realpathSync(abs);
  } catch {
    return abs;
  }
}

/** The route that counts: the measured one when the probe could tell, else the prediction. */
export function effectiveRoute(p: PathReport): PredictedRoute | Route {
  const m = p.probe?.status === 'measured' ? p.probe.route : undefined;
  return m && m !== 'cufile-unknown' ? m : p.prediction.route;
}

/** The verdict when the measurement contradicts the prediction: the measurement stands. */
function disagreement(probe: ProbeResult, prediction: Prediction): string {
  const head = `${probe.route} measured, ${prediction.route} predicted`;
  if (probe.reason) return `${head}: ${probe.reason.message}`;
  if (ROUTE_RANK[probe.route!] > ROUTE_RANK[prediction.route])
    return `${head}: ${prediction.blockers[0] ? `"${prediction.blockers[0].message}" did not stop it here` : 'better than expected'}`;
  return `${head}: cuFile staged the data although nothing checked here stands in the way; set logging.level to INFO in cufile.json and read cufile.log`;
}

/**
 * Examines the platform and each path (default: the current directory) and predicts the route
 * of device reads; with `probe`, also measures it in a child process.
 */
export async function diagnose(paths: string[] = [], options: DiagnoseOptions = {}): Promise<DoctorReport> {
  if (options.shape) {
    checkLength(options.shape.offset, 'shape.offset');
    if (options.shape.size !== undefined) checkLength(options.shape.size, 'shape.size');
    if (options.shape.targetOffset !== undefined) checkLength(options.shape.targetOffset, 'shape.targetOffset');
  }
  const root = new SysRoot(options.root ?? '/');
  const env = options.env ?? process.env;
  const facts = options.facts ?? liveFacts();
  const { checks: platform, state } = inspectPlatform(root, facts, env);
  const reports: PathReport[] = [];
  for (const given of paths.length ? paths : ['.']) {
    const resolved = absolute(root, given);
    const f = inspectPath(root, resolved, state.gpus);
    const prediction = predict(state, f);
    const checks = pathChecks(state, f, prediction);
    const shape = options.shape && f.type === 'file' ? predictShape(state, f, prediction, options.shape) : undefined;
    if (options.shape && !shape)
      checks.push({ id: 'path.shape', status: 'info', title: 'This read', summary: `not predicted: ${f.exists ? `a ${f.type}` : 'the path does not exist'} (a read's shape applies to files)`, data: {} });
    if (shape)
      checks.push({
        id: 'path.shape',
        status: shape.route === 'gds' ? 'pass' : 'warn',
        title: 'This read',
        summary: shapeLine(shape),
        ...(shape.notes.length ? { fix: shape.notes.map((n) => n.message).join('; ') } : {}),
        data: { ...shape },
      });
    let probe: ProbeResult | undefined;
    if (options.probe) {
      const raw: ProbeResult = !root.live
        ? { status: 'skipped', message: 'a recorded root: nothing real to measure' }
        : !state.cudaUsable
          ? { status: 'skipped', message: 'no GPU: nothing to measure' }
          : !f.exists
            ? { status: 'skipped', message: 'the path does not exist: nothing to measure' }
            : await runProbe(f.examined, f.type === 'directory', {
              bytes: shape ? shape.size : options.probeBytes ?? DEFAULT_PROBE_BYTES,
              offset: shape?.offset ?? 0,
              targetOffset: shape?.targetOffset ?? 0,
              cufileConfig: state.cufileConfig.json,
              timeoutMs: options.probeTimeoutMs ?? DEFAULT_PROBE_TIMEOUT_MS,
              env,
              ...(options.probeScript ? { script: options.probeScript } : {}),
            });
      const expected = shape ? (shape.route === 'gds-bounce' ? 'gds' : shape.route) : prediction.route;
      // With nvidia-fs usable the P2PDMA path is not what the direct path depends on.
      const reliesOnP2pdma = state.p2pPath && !(state.nvfsLoaded && state.nvfsDevices > 0);
      const judged = judgeProbe(raw, prediction, expected, { reliesOnP2pdma });
      probe = judged.result;
      checks.push(judged.check);
      if (judged.logCheck) checks.push(judged.logCheck);
    }
    const verdict = probe?.agrees === false && probe.route ? disagreement(probe, prediction) : verdictLine(prediction.route, prediction.blockers);
    checks.push({
      id: 'path.route',
      status: prediction.route === 'gds' ? 'pass' : 'warn',
      title: 'Route',
      summary: verdictLine(prediction.route, prediction.blockers),
      data: { route: prediction.route, blockers: prediction.blockers, warnings: prediction.warnings },
    });
    reports.push({ path: given, resolved, checks, prediction, ...(shape ? { shape } : {}), ...(probe ? { probe } : {}), verdict });
  }
  return {
    schema: 1,
    root: root.base,
    generatedAt: new Date().toISOString(),
    platform,
    paths: reports,
    allDirect: reports.every((r) => effectiveRoute(r) === 'gds'),
  };
}
