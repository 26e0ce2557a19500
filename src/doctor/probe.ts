/**
 * `--probe`: runs the probe script in a child process per path and turns whatever happens to
 * it (a result, an error, a crash, a hang) into a finding. The doctor itself never dies of it.
 */
import { spawn, type ChildProcessByStdio } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { explainingLines, parseCuFileLog, predictedBy, quote, type CuFileLogLine, type KernelPathContext } from './cufile-log.js';
import { PROBE_MARK, type Check, type PredictedRoute, type Prediction, type ProbeResult } from './types.js';

export interface ProbeSettings {
  bytes: number;
  /** Where in the file the read starts. */
  offset?: number;
  /** Where in the GPU buffer the data lands. */
  targetOffset?: number;
  timeoutMs: number;
  env: NodeJS.ProcessEnv;
  script?: string;
  /** The cufile.json in effect (parsed), which the probe's private copy starts from. */
  cufileConfig?: unknown;
}

const OUTPUT_CAP = 1 << 20;
const LOG_CAP = 16 << 20;
/** Enough for cuFile to say why it chose a path for each handle and each I/O. */
export const PROBE_LOG_LEVEL = 'TRACE';

export function defaultProbeScript(): string {
  return fileURLToPath(new URL('./probe-child.js', import.meta.url));
}

/** The lines of cuFile's log that explain the outcome (see cufile-log.ts). */
function readLog(file: string): CuFileLogLine[] | undefined {
  let text: string;
  try {
    const fd = fs.openSync(file, 'r');
    try {
      // TRACE can log per I/O: past LOG_CAP only the start (driver and handle setup, where the
      // reasons are) and the end are read.
      const size = fs.fstatSync(fd).size;
      const read = (at: number, n: number) => {
        const b = Buffer.alloc(n);
        return b.subarray(0, fs.readSync(fd, b, 0, n, at)).toString('utf8');
      };
      text = size <= LOG_CAP ? read(0, size) : `${read(0, LOG_CAP / 2)}\n${read(size - LOG_CAP / 2, LOG_CAP / 2)}`;
    } finally {
      fs.closeSync(fd);
    }
  } catch {
    return undefined;
  }
  return explainingLines(parseCuFileLog(text));
}

/**
 * cuFile's configuration for the probe: the one in effect, with logging at PROBE_LOG_LEVEL into
 * the probe's private directory. The environment variables say the same, for cuFile versions
 * that read only those.
 */
function probeEnvironment(dir: string, settings: ProbeSettings): NodeJS.ProcessEnv {
  const base = settings.cufileConfig && typeof settings.cufileConfig === 'object' ? (settings.cufileConfig as Record<string, unknown>) : {};
  const logging = { ...(base.logging && typeof base.logging === 'object' ? (base.logging as Record<string, unknown>) : {}), dir, level: PROBE_LOG_LEVEL };
  const config = path.join(dir, 'cufile.json');
  fs.writeFileSync(config, JSON.stringify({ ...base, logging }, null, 2), { flag: 'wx', mode: 0o600 });
  return {
    ...settings.env,
    CUFILE_ENV_PATH_JSON: config,
    CUFILE_LOGFILE_PATH: path.join(dir, 'cufile.log'),
    CUFILE_LOGGING_LEVEL: PROBE_LOG_LEVEL,
  };
}

/**
 * Writes the scratch file a directory probe reads: a fresh name, created exclusively (never
 * following a link planted there), so that what is removed afterwards is only what was made here.
 */
function createScratch(dir: string, bytes: number): string {
  for (let attempt = 0; ; attempt++) {
    const file = path.join(dir, `.penstock-doctor-${crypto.randomBytes(8).toString('hex')}.tmp`);
    let fd: number;
    try {
      fd = fs.openSync(file, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL | fs.constants.O_NOFOLLOW, 0o600);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'EEXIST' && attempt < 8) continue;
      throw err;
    }
    try {
      fs.writeSync(fd, Buffer.alloc(bytes, 0x5a));
    } catch (err) {
      fs.closeSync(fd);
      fs.rmSync(file, { force: true });
      throw err;
    }
    fs.closeSync(fd);
    return file;
  }
}

/** Runs one probe. Resolves, never rejects. */
export function runProbe(file: string, directory: boolean, settings: ProbeSettings): Promise<ProbeResult> {
  // A private directory holds cuFile's log and the probe's copy of its configuration.
  const cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'penstock-probe-'));
  let scratch: string | undefined;
  let env: NodeJS.ProcessEnv;
  try {
    env = probeEnvironment(cwd, settings);
    if (directory) scratch = createScratch(file, settings.bytes);
  } catch (err) {
    fs.rmSync(cwd, { recursive: true, force: true });
    return Promise.resolve({ status: 'failed', message: `the probe could not be set up: ${(err as Error).message}` });
  }
  const input = JSON.stringify({ path: scratch ?? file, bytes: settings.bytes, offset: settings.offset ?? 0, targetOffset: settings.targetOffset ?? 0 });
  return new Promise<ProbeResult>((resolve) => {
    let stdout = '';
    let stderr = '';
    let timedOut = false;
    let settled = false;
    const finish = (r: ProbeResult) => {
      if (settled) return;
      settled = true;
      if (scratch) fs.rmSync(scratch, { force: true });
      const log = readLog(path.join(cwd, 'cufile.log'));
      fs.rmSync(cwd, { recursive: true, force: true });
      resolve(log ? { ...r, cufileLog: log.map(quote), cufileLines: log } : r);
    };
    let child: ChildProcessByStdio<null, Readable, Readable>;
    try {
      child = spawn(process.execPath, [settings.script ?? defaultProbeScript(), input], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    } catch (err) {
      finish({ status: 'failed', message: `the probe could not be started: ${(err as Error).message}` });
      return;
    }
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, settings.timeoutMs);
    child.stdout.on('data', (d: Buffer) => {
      if (stdout.length < OUTPUT_CAP) stdout += d.toString('utf8');
    });
    child.stderr.on('data', (d: Buffer) => {
      if (stderr.length < OUTPUT_CAP) stderr += d.toString('utf8');
    });
    child.on('error', (err) => {
      clearTimeout(timer);
      finish({ status: 'failed', message: `the probe could not be started: ${err.message}` });
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      const line = stdout.split('\n').reverse().find((l) => l.startsWith(PROBE_MARK));
      let result: ProbeResult | undefined;
      if (line) {
        try {
          result = JSON.parse(line.slice(PROBE_MARK.length)) as ProbeResult;
        } catch {
          result = undefined;
        }
      }
      const lastErr = stderr.trim().split('\n').slice(-3).join(' | ');
      if (timedOut) {
        finish({ status: 'timeout', message: `the probe took longer than ${settings.timeoutMs} ms and was killed${result ? ` after reporting: ${result.message}` : ''}`, signal: 'SIGKILL' });
      } else if (result) {
        // A result followed by a crash is still a result; the crash (often CUDA or cuFile
        // teardown at exit) is worth knowing about too.
        finish(signal || code ? { ...result, message: `${result.message}; the probe then ${signal ? `died of ${signal}` : `exited with ${code}`}`, ...(signal ? { signal } : { exitCode: code! }) } : result);
      } else if (signal) {
        finish({ status: 'crashed', message: `the probe died of ${signal} before reporting (a crash inside CUDA or cuFile; cufile.log may say why)${lastErr ? `: ${lastErr}` : ''}`, signal });
      } else {
        finish({ status: 'crashed', message: `the probe exited with ${code} without a result${lastErr ? `: ${lastErr}` : ''}`, exitCode: code ?? -1 });
      }
    });
  });
}

function why(r: ProbeResult): string {
  if (!r.reason) return '';
  return `; fallback ${r.reason.code}${r.reason.cufileCode ? ` ${r.reason.cufileCode} (${r.reason.cufileNumber})` : ''}`;
}

/**
 * Compares measurement with prediction and says so as the `path.probe` check; cuFile's lines are
 * judged against the prediction, and those about P2PDMA against `kernelPaths` as well.
 */
export function judgeProbe(
  result: ProbeResult,
  prediction: Prediction,
  expected: PredictedRoute = prediction.route,
  kernelPaths: KernelPathContext = {},
): { result: ProbeResult; check: Check; logCheck?: Check } {
  let agrees: boolean | undefined;
  let note = result.message;
  if (result.status === 'measured' && result.route) {
    const m = result.route;
    const p = expected;
    if (m === 'cufile-unknown') {
      // cuFile carried the read but kept no counters that tell direct from staged.
      agrees = p === 'gds' || p === 'cufile-compat' ? undefined : false;
      note = `measured cufile-unknown (cuFile carried the read; whether it was direct cannot be told without its level-3 statistics); predicted ${p}`;
    } else {
      agrees = m === p;
      note = agrees ? `measured ${m}, as predicted` : `measured ${m}, but predicted ${p}${result.reason ? `: ${result.reason.message}` : ''}`;
    }
  }
  const evidence = (result.cufileLines ?? []).map((l) => {
    const predicted = predictedBy(l, [...prediction.blockers, ...prediction.warnings].map((b) => b.code), kernelPaths);
    return { line: quote(l), ...(l.code ? { code: l.code } : {}), ...(predicted !== undefined ? { predicted } : {}) };
  });
  const { cufileLines: _lines, ...plain } = result;
  const withEvidence: ProbeResult = evidence.length ? { ...plain, cufileEvidence: evidence } : plain;
  const out: ProbeResult = agrees === undefined ? withEvidence : { ...withEvidence, agrees };
  const missed = evidence.filter((e) => e.predicted === false);
  const logCheck: Check | undefined = evidence.length
    ? {
      id: 'path.cufile_log',
      status: missed.length ? 'warn' : 'info',
      title: "cuFile's log",
      summary: evidence.map((e) => `${e.line}${e.predicted === true ? ' [predicted]' : e.predicted === false ? ' [NOT PREDICTED]' : ''}`).join(' | '),
      ...(missed.length ? { fix: `cuFile names a cause the prediction missed (${[...new Set(missed.map((e) => e.code))].join(', ')}): act on cuFile's words` } : {}),
      data: { evidence },
    }
    : undefined;
  const status = result.status === 'measured' ? (agrees === false ? 'warn' : agrees ? 'pass' : 'info') : result.status === 'skipped' ? 'info' : 'fail';
  return {
    result: out,
    check: {
      id: 'path.probe',
      status,
      title: 'Probe',
      summary: result.status === 'measured' ? `${note} (${result.message}${why(result)})` : note,
      ...(result.status === 'crashed' || result.status === 'timeout'
        ? { fix: 'penstock would crash or hang the same way in this process: set PENSTOCK_COMPAT_MODE=on to keep cuFile out until cuFile is fixed (read cufile.log)' }
        : {}),
      data: { ...out },
    },
    ...(logCheck ? { logCheck } : {}),
  };
}
