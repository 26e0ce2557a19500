/**
 * Reads of kept pages (kept-pages.ts decides which, the transfer plan where): on the calling
 * thread, or as one pool operation, which also registers a range the first time. A read the addon
 * refuses before moving a byte (the file changed, or its pages could not be pinned) hands the
 * operation back with the reason, and the plan sends it the usual way.
 */
import { performance } from 'node:perf_hooks';
import { native } from '../addon/binding.js';
import { AbortError, fromNative } from '../vocabulary/errors.js';
import type { Reason } from '../vocabulary/reasons.js';
import type { HandedBack, KeptPlan } from '../plan/transfer-way.js';
import { KEPT_SETTLE_NS, keptTaskSize, type KeptFile } from './kept-pages.js';
import { callingThreadResult, recordOf, type OpRecord, type RunResult } from './op-record.js';
import { runJob, settleInline, type Tally } from './runner.js';

const EBUSY = 16;

/** Where a kept read goes, and what the caller asked for. */
export interface KeptRead {
  fd: number;
  fileOffset: number;
  size: number;
  device: number;
  devicePtr: bigint;
  onProgress: ((bytes: number) => void) | undefined;
  signal: AbortSignal | undefined;
  /** The fallbacks met before this read, for its record. */
  fallbacks: Reason[];
}

/**
 * Reads by `plan`, on the calling thread or through the pool: the operation's record (route
 * `mapped-device`), or what it hands back (the reason to read the usual way; the GPU's inline
 * stream in use). Throws the read's own errors, its failure tallied first.
 */
export async function readKept(file: KeptFile, plan: KeptPlan, onCallingThread: boolean, r: KeptRead, tally: Tally): Promise<OpRecord | HandedBack> {
  const record = (res: RunResult, here: boolean) =>
    recordOf({ kind: 'kept', pages: plan.keep ? 'registered' : 'reused', onCallingThread: here }, 'mapped-device', r.device, res, false, r.fallbacks);
  if (onCallingThread) {
    const t0 = performance.now();
    let got: number;
    try {
      got = native().readKept(plan.id, r.fd, r.fileOffset, r.size, r.device, r.devicePtr);
    } catch (err) {
      return refused(file, plan, fromNative(err), tally);
    }
    if (got === r.size) return settleInline(record(callingThreadResult(got, Math.round((performance.now() - t0) * 1e6), true), true), tally.done, r.onProgress);
    // Another thread holds the inline stream: the pool reads it.
    if (got === -EBUSY) return { keptStreamBusy: true };
    return refused(file, plan, new Error(`readKept gave ${got}`), tally);
  }
  const out = await runJob(
    () =>
      native().submitKept({
        id: plan.id, keep: plan.keep, issue: plan.issue, fd: r.fd, fileOffset: r.fileOffset, size: r.size, taskSize: keptTaskSize(r.size), device: r.device, devicePtr: r.devicePtr,
        settleNs: KEPT_SETTLE_NS, ...(r.onProgress ? { progress: r.onProgress } : {}),
      }),
    r.signal,
  );
  if (!out.ok) {
    // An abort is the read's own end; anything else may be a reason to read the usual way.
    if (out.submitted && out.error instanceof AbortError) {
      file.failed(plan, out.error);
      tally.failed();
      throw out.error;
    }
    return refused(file, plan, out.error, tally);
  }
  file.succeeded(plan);
  return tally.done(record(out.results[0]!, false));
}

/** The reason to read the usual way after `err`, or `err` thrown when it is the read's own. */
function refused(file: KeptFile, plan: KeptPlan, err: Error, tally: Tally): HandedBack {
  const why = file.failed(plan, err);
  if (why) return { kept: why };
  tally.failed();
  throw err;
}
