/**
 * The record of one operation that ran to its end: the way that moved it, with the numbers only
 * that way has, the route its counters are booked under, and every fallback it met, each a code
 * with its sentence. The way is read off what ran (the addon's result), never off the plan: a
 * mapped share that carried nothing, or a gather stage another read held, is not claimed.
 */
import type { NativeOpResult } from '../vocabulary/native-contract.js';
import type { Reason, Route } from '../vocabulary/reasons.js';
import type { StagedWay } from '../plan/transfer-way.js';
import type { Booking, WorkShare } from './stats.js';

/** The way an operation ran, with the numbers particular to it. */
export type RecordedWay =
  /** cuFile's read or write (whether it went direct is the record's `route`). */
  | { kind: 'cufile' }
  /** Pool tasks through the workers' bounce halves (reads and writes into and from the GPU). */
  | { kind: 'staged'; variant: 'bounce' }
  /** A staged read of uncached data through the page cache: one stripe per worker, read front to back into its bounce halves. */
  | { kind: 'staged'; variant: 'striped' }
  /** A staged read whose tasks filled the GPU's gather stage, which went to the GPU in `orderedCopies` copies, in order, on one stream. */
  | { kind: 'staged'; variant: 'gathered'; orderedCopies: number }
  /**
   * A staged read of which the GPU copied the share `mapped` straight out of page-cache pages
   * (route `mapped-device`); the bounce halves carried the rest.
   */
  | { kind: 'staged'; variant: 'mapped'; mapped: WorkShare }
  /**
   * One copy out of page-cache pages kept registered (route `mapped-device`, see `keptPagesMax`):
   * `registered` when this read registered its range and kept it, `reused` when it copied from
   * pages an earlier read kept; on the calling thread or through the pool.
   */
  | { kind: 'kept'; pages: 'registered' | 'reused'; onCallingThread: boolean }
  /**
   * Preads from the page cache into the GPU's inline staging on the calling thread.
   * `helpedPieces`: where pool workers were asked to help (reads from 256 KiB with a worker
   * watching the queue), how many of the pieces they read.
   */
  | { kind: 'inline-device'; helpedPieces?: number }
  /** One non-blocking pread from the page cache into host memory, on the calling thread. */
  | { kind: 'inline-host' }
  /** Pool tasks straight between the file and host memory. */
  | { kind: 'pool-host' };

/**
 * One operation's record. `tasks` and `bytes` are the whole operation's; the times are those of
 * `route`'s share (a mapped share's are in its way).
 */
export interface OpRecord extends WorkShare {
  /** The way that moved the data. */
  way: RecordedWay;
  /** The route its counters are booked under (`gds` only on cuFile's own evidence). */
  route: Route;
  /** The GPU, for device memory. */
  device?: number;
  /** O_DIRECT carried every byte (bypassing the page cache). */
  direct: boolean;
  /**
   * Faster ways that did not carry the operation, or part of it, each with its reason: kept pages
   * not kept or refused, the mapped share refused, O_DIRECT refused. Empty when nothing fell
   * back. Why the file's device I/O does not go through cuFile is the file's (`route.reason`).
   */
  fallbacks: Reason[];
  /** The most of its tasks that ran at once (its mapped share not counted). */
  peakTasks: number;
}

/** What ran, as the addon reports it (or as the calling thread measured it). */
export type RunResult = Omit<NativeOpResult, 'timeline'>;

/** The record of an operation that ran `way` on `route`, from its result. */
export function recordOf(way: RecordedWay, route: Route, device: number | undefined, r: RunResult, direct: boolean, fallbacks: Reason[]): OpRecord {
  const own = r.routeShare;
  return {
    way, route, ...(device !== undefined ? { device } : {}), direct, fallbacks,
    tasks: r.tasks, bytes: r.bytes, busyNs: own.busyNs, ioNs: own.ioNs, waitNs: own.waitNs, peakTasks: r.peakTasks,
  };
}

/**
 * The result of `bytes` moved by the calling thread in `ns`: one task, its time spent reading, or
 * (a copy the calling thread issued and waited for) waiting.
 */
export function callingThreadResult(bytes: number, ns: number, waited: boolean): RunResult {
  return { bytes, tasks: 1, peakTasks: 1, routeShare: { tasks: 1, bytes, busyNs: ns, ioNs: waited ? 0 : ns, waitNs: waited ? ns : 0 } };
}

/**
 * How a staged operation planned as `planned` ran: mapped where its mapped share carried a task,
 * gathered where it held the gather stage, striped as planned (nothing turns stripes off).
 */
export function stagedAsRun(r: RunResult, planned: StagedWay['variant']): RecordedWay {
  const m = r.mapped;
  if (m && m.tasks > 0) return { kind: 'staged', variant: 'mapped', mapped: { tasks: m.tasks, bytes: m.bytes, busyNs: m.busyNs, ioNs: m.ioNs, waitNs: m.waitNs } };
  if (r.orderedCopies !== undefined) return { kind: 'staged', variant: 'gathered', orderedCopies: r.orderedCopies };
  return { kind: 'staged', variant: planned === 'striped' ? 'striped' : 'bounce' };
}

/** The share of `rec` the mapped route carried, if any. */
export function mappedShareOf(rec: OpRecord): WorkShare | undefined {
  return rec.way.kind === 'staged' && rec.way.variant === 'mapped' ? rec.way.mapped : undefined;
}

/** What the counters take from `rec`. */
export function bookingOf(rec: OpRecord): Booking {
  const mapped = mappedShareOf(rec);
  const { route, device, tasks, bytes, busyNs, ioNs, waitNs } = rec;
  return { route, ...(device !== undefined ? { device } : {}), tasks, bytes, busyNs, ioNs, waitNs, ...(mapped ? { mapped } : {}) };
}
