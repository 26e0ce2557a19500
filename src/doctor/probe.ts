/**
 * `--probe`: runs the probe script in a child process per path and turns whatever happens to
 * it (a result, an error, a crash, a hang) into a finding. The doctor itself never dies of it.
 */
import { spawn, type ChildProcessByStdio } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { PROBE_MARK, type Check, type Prediction, type ProbeResult } from './types.js';

export interface ProbeSettings {
  bytes: number;
  timeoutMs: number;
  env: NodeJS.ProcessEnv;
  script?: string;
}

const OUTPUT_CAP = 1 << 20;
let scratchCount = 0;

export function defaultProbeScript(): string {
  return fileURLToPath(new URL('./probe-child.js', import.meta.url));
}

/** The last lines of cuFile's log, where they say something worse than INFO. */
function logTail(file: string): string[] | undefined {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
  const lines = text.split('\n').filter((l) => l.trim() !== '');
  const notable = lines.filter((l) => /\b(ERROR|WARN|NOTICE)\b|compatible mode|udev/i.test(l));
  return (notable.length ? notable : lines).slice(-12);
}

/** Runs one probe. Resolves, never rejects. */
export function runProbe(file: string, directory: boolean, settings: ProbeSettings): Promise<ProbeResult> {
  // A private working directory catches cufile.log (cuFile writes it to the working
  // directory unless told otherwise) so its complaints can be shown with the result.
  const cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'penstock-probe-'));
  // The parent names the scratch file of a directory probe, so that it can remove it even when
  // the probe dies before its own clean-up runs.
  const scratch = directory ? path.join(file, `.penstock-doctor-${process.pid}-${++scratchCount}.tmp`) : undefined;
  const input = JSON.stringify({ path: scratch ?? file, bytes: settings.bytes, create: scratch !== undefined });
  return new Promise<ProbeResult>((resolve) => {
    let stdout = '';
    let stderr = '';
    let timedOut = false;
    let settled = false;
    const finish = (r: ProbeResult) => {
      if (settled) return;
      settled = true;
      if (scratch) fs.rmSync(scratch, { force: true });
      const log = logTail(path.join(cwd, 'cufile.log'));
      fs.rmSync(cwd, { recursive: true, force: true });
      resolve(log ? { ...r, cufileLog: log } : r);
    };
    let child: ChildProcessByStdio<null, Readable, Readable>;
    try {
      child = spawn(process.execPath, [settings.script ?? defaultProbeScript(), input], { cwd, env: settings.env, stdio: ['ignore', 'pipe', 'pipe'] });
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

/** Compares measurement with prediction and says so as the `path.probe` check. */
export function judgeProbe(result: ProbeResult, prediction: Prediction): { result: ProbeResult; check: Check } {
  let agrees: boolean | undefined;
  let note = result.message;
  if (result.status === 'measured' && result.route) {
    const m = result.route;
    const p = prediction.route;
    if (m === 'cufile-unknown') {
      // cuFile carried the read but kept no counters that tell direct from staged.
      agrees = p === 'gds' || p === 'cufile-compat' ? undefined : false;
      note = `measured cufile-unknown (cuFile carried the read; whether it was direct cannot be told without its level-3 statistics); predicted ${p}`;
    } else {
      agrees = m === p;
      note = agrees ? `measured ${m}, as predicted` : `measured ${m}, but predicted ${p}${result.reason ? `: ${result.reason.message}` : ''}`;
    }
  }
  const out: ProbeResult = agrees === undefined ? result : { ...result, agrees };
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
  };
}
