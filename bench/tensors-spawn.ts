/**
 * A child process on the parent's clock, for `bench:tensors`: from just before spawn to the
 * child's ready line on file descriptor 3, and to its exit. The parent does nothing else
 * meanwhile, so its event loop notices the line within a fraction of a millisecond.
 */
import { spawn } from 'node:child_process';
import { parseReadyLines, type ReadyReport } from './tensors-rows.js';

export interface TimedRun {
  code: number | null;
  signal: string | null;
  /** Seconds from spawn to the first ready line (undefined: none came). */
  wallReadyS?: number;
  /** Seconds from spawn to exit. */
  wallExitS: number;
  ready?: ReadyReport;
  stdout: string;
  stderr: string;
  timedOut: boolean;
  /** Why the process could not start. */
  spawnError?: string;
}

const CAP = 64 << 20;

/** Runs `cmd args` with stdin closed, stdout, stderr and descriptor 3 piped; kills it after `timeoutS`. */
export function runTimed(cmd: string, args: readonly string[], opts: { env?: NodeJS.ProcessEnv; cwd?: string; timeoutS: number }): Promise<TimedRun> {
  return new Promise((resolve) => {
    const t0 = performance.now();
    let exitAt: number | undefined;
    let readyAt: number | undefined;
    let ready: ReadyReport | undefined;
    let fd3 = '';
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    let outBytes = 0;
    let errBytes = 0;
    let timedOut = false;
    let spawnError: string | undefined;
    const child = spawn(cmd, args, { env: opts.env ?? process.env, cwd: opts.cwd, stdio: ['ignore', 'pipe', 'pipe', 'pipe'] });
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, opts.timeoutS * 1e3);
    child.stdout!.on('data', (b: Buffer) => {
      if (outBytes < CAP) out.push(b);
      outBytes += b.length;
    });
    child.stderr!.on('data', (b: Buffer) => {
      if (errBytes < CAP) err.push(b);
      errBytes += b.length;
    });
    (child.stdio[3] as NodeJS.ReadableStream).on('data', (b: Buffer) => {
      const at = performance.now();
      if (readyAt !== undefined) return;
      fd3 += b.toString('utf8');
      const nl = fd3.lastIndexOf('\n');
      if (nl < 0) return;
      const reports = parseReadyLines(fd3.slice(0, nl + 1));
      if (reports.length) {
        readyAt = at;
        ready = reports[0];
      }
    });
    child.on('error', (e) => {
      spawnError = e.message;
    });
    child.on('exit', () => {
      exitAt = performance.now();
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      const end = exitAt ?? performance.now();
      const r: TimedRun = {
        code,
        signal,
        wallExitS: (end - t0) / 1e3,
        stdout: Buffer.concat(out).toString('utf8'),
        stderr: Buffer.concat(err).toString('utf8'),
        timedOut,
      };
      if (readyAt !== undefined) r.wallReadyS = (readyAt - t0) / 1e3;
      if (ready) r.ready = ready;
      if (spawnError) r.spawnError = spawnError;
      resolve(r);
    });
  });
}

/** The last lines of a text, on one line (for errors in a table). */
export function tail(text: string, lines = 3, chars = 400): string {
  return text.trim().split('\n').slice(-lines).join(' ⏎ ').slice(-chars);
}

/** Why a run failed, in one line, or undefined when it exited 0. */
export function failure(r: TimedRun): string | undefined {
  if (r.spawnError) return `could not start: ${r.spawnError}`;
  if (r.timedOut) return `killed after the run timeout (${r.wallExitS.toFixed(0)} s)`;
  if (r.code === 0) return undefined;
  return `exit ${r.code ?? r.signal}: ${tail(r.stderr || r.stdout)}`;
}
