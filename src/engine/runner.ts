/**
 * The one way an operation runs, whatever carries it: native jobs on the pool (a transfer, a
 * read of kept pages, the parts of a batch) are submitted, cancelled when the caller's signal
 * aborts, awaited, and their errors converted in one place; a read done on the calling thread
 * is settled the way the pool settles one. Each caller then counts the record of what ran.
 */
import type { NativeOp } from '../addon/binding.js';
import { AbortError, fromNative } from '../vocabulary/errors.js';
import type { OpRecord } from './op-record.js';

/** How a run ended: every job's result in submission order, or the first error (converted). */
export type RunOutcome<R> = { ok: true; results: R[] } | { ok: false; error: Error };

/**
 * Native jobs that run as one: the first failure (a refusal at submit included) cancels the
 * others, an abort of `signal` cancels them all, and the run settles once every job has, so
 * nothing of it writes into its memory after. An abort's error carries the signal's reason as
 * its cause; native errors name `path` where given.
 */
export class JobRun<R> {
  readonly #signal: AbortSignal | undefined;
  readonly #path: string | undefined;
  readonly #jobs: NativeOp<R>[] = [];
  readonly #promises: Promise<R>[] = [];
  #firstError: unknown;
  #failed = false;
  readonly #cancelAll = () => {
    for (const job of this.#jobs) job.cancel();
  };

  /**
   * @param signal cancels every job when it aborts
   * @param path the file that native errors name
   */
  constructor(signal: AbortSignal | undefined, path?: string) {
    this.#signal = signal;
    this.#path = path;
    signal?.addEventListener('abort', this.#cancelAll, { once: true });
  }

  /** Jobs started so far. */
  get size(): number {
    return this.#jobs.length;
  }

  /**
   * Starts one more job with `start`. False when the addon refused it: the refusal is the run's
   * error and the jobs already started are cancelled.
   */
  submit(start: () => NativeOp<R>): boolean {
    let job: NativeOp<R>;
    try {
      job = start();
    } catch (err) {
      this.#fail(err);
      return false;
    }
    this.#jobs.push(job);
    const promise = job.promise;
    promise.catch((err: unknown) => this.#fail(err));
    this.#promises.push(promise);
    return true;
  }

  /** Waits for every job started; never throws. */
  async settled(): Promise<RunOutcome<R>> {
    const out = await this.settledRaw();
    return out.ok ? out : { ok: false, error: withAbortReason(fromNative(out.error, this.#path), this.#signal) };
  }

  /**
   * As settled(), with the first error as the addon gave it, for a caller that converts it in its
   * own frame (runRecorded): an error's stack keeps only ten frames, and each frame between the
   * conversion and the caller's await pushes the caller's own frame out of it.
   */
  async settledRaw(): Promise<{ ok: true; results: R[] } | { ok: false; error: unknown }> {
    try {
      const results = await Promise.allSettled(this.#promises);
      if (this.#failed) return { ok: false, error: this.#firstError };
      return { ok: true, results: results.map((r) => (r as PromiseFulfilledResult<R>).value) };
    } finally {
      this.#signal?.removeEventListener('abort', this.#cancelAll);
    }
  }

  #fail(err: unknown): void {
    if (!this.#failed) {
      this.#failed = true;
      this.#firstError = err;
    }
    this.#cancelAll();
  }
}

/** A native error converted by fromNative, as the caller sees it: an abort carries the signal's reason as its cause. */
function withAbortReason(e: Error, signal: AbortSignal | undefined): Error {
  return e instanceof AbortError && signal?.reason !== undefined ? new AbortError(undefined, { cause: signal.reason }) : e;
}

/** Runs one native job started by `start` (see JobRun): its result, or its error. */
export async function runJob<R>(start: () => NativeOp<R>, signal: AbortSignal | undefined, path?: string): Promise<RunOutcome<R> & { submitted: boolean }> {
  const run = new JobRun<R>(signal, path);
  const submitted = run.submit(start);
  return { ...(await run.settled()), submitted };
}

/**
 * Where one operation is counted: its record, when it ran to its end, or its failure (a failed
 * operation has no record: its caller gets the error).
 */
export interface Tally {
  /** Counts `rec` and gives it back. */
  done(rec: OpRecord): OpRecord;
  /** Counts a failure. */
  failed(): void;
}

/**
 * Runs one native job and counts it: `record` makes the record from its result, and `tally`
 * counts that or the failure. A refusal at submit throws with nothing counted (no operation
 * ran); a failure is counted, then thrown.
 */
export async function runRecorded<R>(start: () => NativeOp<R>, signal: AbortSignal | undefined, path: string | undefined, record: (r: R) => OpRecord, tally: Tally): Promise<OpRecord> {
  const run = new JobRun<R>(signal, path);
  const submitted = run.submit(start);
  const out = await run.settledRaw();
  if (out.ok) return tally.done(record(out.results[0]!));
  if (submitted) tally.failed();
  // Converted here, in the frame the caller awaits (see settledRaw).
  throw withAbortReason(fromNative(out.error, path), signal);
}

/**
 * Settles a read done on the calling thread as the pool settles one: the record is counted now,
 * and progress (`onProgress`, with the record's bytes) comes after the call returns, as it does
 * from the pool. A throwing callback cannot break the read: it is reported like an unhandled
 * error.
 */
export function settleInline(rec: OpRecord, count: (rec: OpRecord) => OpRecord, onProgress: ((bytes: number) => void) | undefined): Promise<OpRecord> {
  count(rec);
  if (!onProgress) return Promise.resolve(rec);
  return Promise.resolve().then(() => {
    try {
      onProgress(rec.bytes);
    } catch (err) {
      queueMicrotask(() => {
        throw err;
      });
    }
    return rec;
  });
}
