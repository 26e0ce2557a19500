/**
 * What a batch gives back: bytes and errors per range, the record of how it was carried, and the
 * process-wide counters, joined over the parts it went to the pool in (batch-read.ts).
 */
import type { NativeBatchResult } from '../../vocabulary/native-contract.js';
import type { BatchPlan, PlanColumns } from '../../plan/batch-plan.js';
import { fromNative } from '../../vocabulary/errors.js';
import type { PenstockFile } from '../file.js';
import { copyBatchFallbackReason, ringFallbackReason, type Reason } from '../../vocabulary/reasons.js';
import { failedBooking, globalStats, type Route } from '../stats.js';

/** What one route carried of a batch. */
export interface BatchRouteCounts {
  /** Ranges (or parts of them, for ranges cut to fit staging) that took the route. */
  ranges: number;
  /** preads issued. */
  ops: number;
  /** Bytes delivered into the targets. */
  bytes: number;
  /** Copies to the GPU (device routes). */
  copies?: number;
  /**
   * Driver calls that carried several of `copies` at once (`cuMemcpyBatchAsync`): a fill of
   * staging whose ranges lie apart on the GPU goes in one per `COPY_BATCH_MAX` (1024) copies
   * (device routes).
   */
  copyBatches?: number;
}

/** The record of a batch: what was asked and how it was carried. */
export interface BatchRecord {
  /** Ranges in the batch. */
  ranges: number;
  /**
   * Parts the batch went to the pool in, each planned while the pool read the one before: the
   * first of up to `BATCH_PART_PIECES` pieces, each later one up to twice the one before.
   */
  parts: number;
  /** Tasks the batch was split into on the pool, over all its parts. */
  tasks: number;
  /** What each route carried, keyed by route; a route no range took is absent. */
  routes: Partial<Record<Route, BatchRouteCounts>>;
  /** Thread time over all tasks, and of it inside pread and waiting for GPU copies (ns). */
  busyNs: number;
  /** Of `busyNs`, thread time inside pread (ns). */
  ioNs: number;
  /** Of `busyNs`, thread time waiting for GPU copies to finish (ns). */
  waitNs: number;
  /**
   * Of the preads (the routes' `ops`), those issued through io_uring, many to one system call.
   * A task's lone read goes by pread.
   */
  ringReads: number;
  /**
   * Faster ways the batch did not take, each with its code and the sentence to act on: reads
   * that went by pread where the plan gave them io_uring (`IO_URING_UNAVAILABLE`), copies the
   * plan would have batched that went one call each (`COPY_BATCH_UNAVAILABLE`). Empty when
   * nothing fell back.
   */
  fallbacks: Reason[];
}

/** The outcome of a batch. */
export interface BatchReadResult {
  /**
   * Bytes read per range, in the order given: the range's size, fewer when the range reaches
   * end of file (not an error; the rest of its target is untouched), and what arrived before
   * the failure for a range in `errors`.
   */
  bytes: Float64Array;
  /** The ranges that failed, by index, each with its typed error; the others were read. */
  errors: Map<number, Error>;
  /** Sum of `bytes`. */
  totalBytes: number;
  /** How the batch was carried: tasks, routes and thread time. */
  record: BatchRecord;
}

/** One settled part of a batch: its plan, the bytes its pieces got, and the addon's result. */
export interface SettledPart {
  plan: BatchPlan;
  pieceBytes: Float64Array;
  result: NativeBatchResult;
}

/**
 * The result of a batch whose parts all settled: bytes and errors per range (in the order given),
 * the record over all parts, and the process-wide counters updated.
 */
export function batchResult(parts: readonly SettledPart[], planned: PlanColumns, files: readonly PenstockFile[], hostRangeCount: number): BatchReadResult {
  const count = planned.count;
  const bytes = new Float64Array(count);
  const errors = new Map<number, Error>();
  let hostBytes = 0;
  let deviceBytes = 0;
  const sum = { hostReads: 0, deviceReads: 0, tasks: 0, copies: 0, copyBatches: 0, unbatchedFills: 0, busyNs: 0, ioNs: 0, waitNs: 0, ringReads: 0 };
  let ringError: NativeBatchResult['ringError'] = null;
  for (const { plan, pieceBytes, result: r } of parts) {
    const { pieceRange, readPieces } = plan;
    for (let k = 0; k < pieceRange.length; k++) {
      const i = pieceRange[k]!;
      bytes[i] = bytes[i]! + pieceBytes[k]!;
      if (planned.device[i]! < 0) hostBytes += pieceBytes[k]!;
      else deviceBytes += pieceBytes[k]!;
    }
    for (const { read, error } of r.readErrors) {
      const file = files[plan.reads[read * 7]!];
      for (let k = readPieces[read]!; k < readPieces[read + 1]!; k++) {
        const i = pieceRange[k]!;
        if (!errors.has(i)) errors.set(i, fromNative(error, file?.path));
      }
    }
    sum.hostReads += plan.counts.hostReads;
    sum.deviceReads += plan.counts.deviceReads;
    sum.tasks += plan.counts.tasks;
    sum.copies += r.copies;
    sum.copyBatches += r.copyBatches;
    sum.unbatchedFills += r.unbatchedFills;
    sum.busyNs += r.busyNs;
    sum.ioNs += r.ioNs;
    sum.waitNs += r.waitNs;
    sum.ringReads += r.ringReads;
    ringError ??= r.ringError;
  }
  const routes: BatchRecord['routes'] = {};
  const { hostReads, deviceReads } = sum;
  const reads = hostReads + deviceReads;
  const share = (n: number) => (reads ? n / reads : 0);
  if (hostRangeCount > 0) {
    routes['posix-host'] = { ranges: hostRangeCount, ops: hostReads, bytes: hostBytes };
    record('posix-host', hostReads, hostBytes, sum, share(hostReads));
  }
  if (hostRangeCount < count) {
    routes['posix-device'] = { ranges: count - hostRangeCount, ops: deviceReads, bytes: deviceBytes, copies: sum.copies, copyBatches: sum.copyBatches };
    record('posix-device', deviceReads, deviceBytes, sum, share(deviceReads));
  }
  let totalBytes = 0;
  for (let i = 0; i < count; i++) totalBytes += bytes[i]!;
  return {
    bytes, errors, totalBytes,
    record: {
      ranges: count, parts: parts.length, tasks: sum.tasks, routes, busyNs: sum.busyNs, ioNs: sum.ioNs, waitNs: sum.waitNs, ringReads: sum.ringReads,
      fallbacks: [...(ringError ? [ringFallbackReason(ringError)] : []), ...(sum.unbatchedFills ? [copyBatchFallbackReason(sum.unbatchedFills)] : [])],
    },
  };
}

/** Process-wide counters: a batch counts as one operation per route, its preads as that route's ops. */
function record(route: Route, ops: number, bytes: number, r: { busyNs: number; ioNs: number; waitNs: number }, share: number): void {
  globalStats.record({ route, tasks: ops, bytes, busyNs: r.busyNs * share, ioNs: r.ioNs * share, waitNs: r.waitNs * share });
}

/** Counts a batch that failed as a whole (an abort, a failed copy) against the routes it would have taken. */
export function recordBatchFailure(device: boolean, host: boolean): void {
  if (host) globalStats.record(failedBooking('posix-host', undefined));
  if (device) globalStats.record(failedBooking('posix-device', undefined));
}
