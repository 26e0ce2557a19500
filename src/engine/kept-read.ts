/**
 * Reads of kept pages (kept-pages.ts decides which): on the calling thread when the read is small
 * and nothing else is in flight, else as one pool operation, which also registers a range the
 * first time. A read the addon refuses before moving a byte (the file changed, or its pages
 * could not be pinned) hands back the reason, and the caller reads the range the usual way.
 */
import { performance } from 'node:perf_hooks';
import { native } from '../addon/binding.js';
import type { Settings } from '../settings/config.js';
import { AbortError, fromNative } from '../vocabulary/errors.js';
import { KEPT_SETTLE_NS, keptTaskSize, type KeptFile, type KeptPlan } from './kept-pages.js';
import type { Reason } from '../vocabulary/reasons.js';
import { recordOf, type OpRecord } from './stats.js';
import { runJob, settleInline } from './runner.js';

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
}

/**
 * Reads by `plan`: the operation's record (route `mapped-device`), or the reason to read the
 * usual way. Throws the read's own errors, counting a failed record through `count` first.
 */
export async function readKept(s: Readonly<Settings>, file: KeptFile, plan: KeptPlan, r: KeptRead, count: (rec: OpRecord) => OpRecord): Promise<OpRecord | Reason> {
  if (!plan.keep && r.size <= s.inlineReadMax && native().inflight() === 0) {
    const t0 = performance.now();
    let got: number;
    try {
      got = native().readKept(plan.id, r.fd, r.fileOffset, r.size, r.device, r.devicePtr);
    } catch (err) {
      return refused(file, plan, fromNative(err), r.device, count);
    }
    if (got === r.size) {
      const ns = Math.round((performance.now() - t0) * 1e6);
      const rec = recordOf('mapped-device', r.device, { bytes: got, tasks: 1, peakTasks: 1, routeShare: { tasks: 1, bytes: got, busyNs: ns, ioNs: 0, waitNs: ns } }, false, false);
      rec.inline = true;
      rec.kept = 'reused';
      return settleInline(rec, count, r.onProgress);
    }
    if (got !== -EBUSY) return refused(file, plan, new Error(`readKept gave ${got}`), r.device, count);
    // Another thread holds the inline stream: the pool reads it.
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
      count(recordOf('mapped-device', r.device, undefined, true, false));
      throw out.error;
    }
    return refused(file, plan, out.error, r.device, count);
  }
  file.succeeded(plan);
  const rec = recordOf('mapped-device', r.device, out.results[0], false, false);
  rec.kept = plan.keep ? 'registered' : 'reused';
  return count(rec);
}

/** The reason to read the usual way after `err`, or `err` thrown when it is the read's own. */
function refused(file: KeptFile, plan: KeptPlan, err: Error, device: number, count: (rec: OpRecord) => OpRecord): Reason {
  const why = file.failed(plan, err);
  if (why) return why;
  count(recordOf('mapped-device', device, undefined, true, false));
  throw err;
}
