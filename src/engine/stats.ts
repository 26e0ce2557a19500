/**
 * The route of every operation, on record. Each task is counted under the route that actually
 * carried it; `gds` is only ever recorded on evidence from cuFile's own counters.
 */
import type { CuFileEvidence } from '../addon/cufile-driver.js';

export type { Route } from '../vocabulary/reasons.js';
import type { Route } from '../vocabulary/reasons.js';

/** Every route, in the order reports list them. */
export const ROUTES: readonly Route[] = ['gds', 'cufile-compat', 'cufile-unknown', 'posix-device', 'mapped-device', 'posix-host'];

/** One route's counters. */
export interface RouteCounters {
  /** Tasks carried by this route (a 1 GiB read with 4 MiB tasks is 256). */
  ops: number;
  /** Bytes moved. */
  bytes: number;
  /** Thread time spent in those tasks, seconds. */
  busySeconds: number;
  /**
   * Of the busy time, seconds inside read and write system calls (for `mapped-device`: pinning
   * and unpinning the pages); the rest is penstock's own work, such as copying.
   */
  ioSeconds: number;
  /** Of the busy time, seconds spent waiting for copies to or from the GPU. */
  waitSeconds: number;
  /** User-visible operations (reads/writes) that took this route. */
  operations: number;
  /** Operations that failed on this route. */
  errors: number;
}

/** Counters by route, process-wide or per file. */
export interface StatsSnapshot {
  /** Every route, zero where unused. */
  routes: Record<Route, RouteCounters>;
  /** The same counters per GPU ordinal (device routes only). */
  devices: Record<number, Record<Route, RouteCounters>>;
}

function emptyRoutes(): Record<Route, RouteCounters> {
  const r = {} as Record<Route, RouteCounters>;
  for (const k of ROUTES) r[k] = { ops: 0, bytes: 0, busySeconds: 0, ioSeconds: 0, waitSeconds: 0, operations: 0, errors: 0 };
  return r;
}

function cloneRoutes(r: Record<Route, RouteCounters>): Record<Route, RouteCounters> {
  const out = {} as Record<Route, RouteCounters>;
  for (const k of ROUTES) out[k] = { ...r[k] };
  return out;
}

/** A share of an operation's work: its tasks, bytes and thread time. */
export interface WorkShare {
  tasks: number;
  bytes: number;
  busyNs: number;
  ioNs: number;
  waitNs: number;
}

/**
 * What the counters take from one operation: its route and device, the whole operation's tasks
 * and bytes with the thread time of the route's share, and the share the mapped route carried
 * (where it carried any). A failed operation books no work.
 */
export interface Booking extends WorkShare {
  route: Route;
  device?: number;
  failed?: boolean;
  mapped?: WorkShare;
}

/** The booking of an operation on `route` that failed. */
export function failedBooking(route: Route, device: number | undefined): Booking {
  return { route, ...(device !== undefined ? { device } : {}), tasks: 0, bytes: 0, busyNs: 0, ioNs: 0, waitNs: 0, failed: true };
}

export class StatsBook {
  #routes = emptyRoutes();
  #devices = new Map<number, Record<Route, RouteCounters>>();

  record(op: Booking): void {
    const add = (c: RouteCounters, w: WorkShare, less?: WorkShare) => {
      c.ops += w.tasks - (less?.tasks ?? 0);
      c.bytes += w.bytes - (less?.bytes ?? 0);
      c.busySeconds += w.busyNs / 1e9;
      c.ioSeconds += w.ioNs / 1e9;
      c.waitSeconds += w.waitNs / 1e9;
    };
    const apply = (r: Record<Route, RouteCounters>) => {
      const c = r[op.route];
      const m = op.mapped && op.mapped.tasks > 0 ? op.mapped : undefined;
      const staged = !m || op.tasks > m.tasks;
      if (m) r['mapped-device'].operations += 1;
      if (staged) c.operations += 1;
      if (op.failed) {
        (staged ? c : r['mapped-device']).errors += 1;
        return;
      }
      add(c, op, m);
      if (m) add(r['mapped-device'], m);
    };
    apply(this.#routes);
    if (op.device !== undefined) {
      let d = this.#devices.get(op.device);
      if (!d) this.#devices.set(op.device, (d = emptyRoutes()));
      apply(d);
    }
  }

  snapshot(): StatsSnapshot {
    const devices: Record<number, Record<Route, RouteCounters>> = {};
    for (const [k, v] of this.#devices) devices[k] = cloneRoutes(v);
    return { routes: cloneRoutes(this.#routes), devices };
  }

  reset(): void {
    this.#routes = emptyRoutes();
    this.#devices.clear();
  }
}

/** Process-wide statistics. */
export const globalStats = new StatsBook();

export type { CuFileEvidence } from '../addon/cufile-driver.js';

/**
 * Decides `gds` versus `cufile-compat` from the counter growth over an operation. Only growth of
 * one kind is evidence; growth of both (concurrent I/O) or no counters at all is `unknown`.
 */
export function classifyCuFile(before: CuFileEvidence | null, after: CuFileEvidence | null): Route {
  if (!before || !after) return 'cufile-unknown';
  const direct = after.direct - before.direct;
  const posix = after.posix - before.posix;
  if (direct > 0 && posix === 0) return 'gds';
  if (posix > 0 && direct === 0) return 'cufile-compat';
  return 'cufile-unknown';
}
