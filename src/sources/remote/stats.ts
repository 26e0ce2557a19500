/**
 * Counters of remote reads, per source and process-wide, by route: `remote-host` (bodies written
 * straight into host memory) and `remote-device` (bodies into pinned staging, then copied to the
 * GPU). They hold counts and times only: no address, header or credential.
 */

/** The routes of remote reads. */
export type RemoteRoute = 'remote-host' | 'remote-device';

/** Every remote route. */
export const REMOTE_ROUTES: readonly RemoteRoute[] = ['remote-host', 'remote-device'];

/** What one route carried. */
export interface RemoteRouteCounters {
  /** Reads (`read()` calls) that took this route. */
  operations: number;
  /** Reads that failed. */
  errors: number;
  /** HTTP requests sent for these reads, retries included. */
  requests: number;
  /** Of those, repeats of a request that failed transiently. */
  retries: number;
  /** Body bytes kept (those of the reads' results). */
  bytes: number;
  /** Wall-clock seconds of the reads, from call to settle. */
  seconds: number;
}

/** Counters of remote reads by route. */
export interface RemoteStatsSnapshot {
  /** Counters per route: `remote-host` (reads into host memory) and `remote-device` (into GPU memory). */
  routes: Record<RemoteRoute, RemoteRouteCounters>;
  /** Size probes (HEAD or 1-byte GET) sent when objects were opened, retries included. */
  probeRequests: number;
}

/** One read's outcome, as recorded. */
export interface RemoteOpRecord {
  route: RemoteRoute;
  requests: number;
  retries: number;
  bytes: number;
  seconds: number;
  failed: boolean;
}

function empty(): Record<RemoteRoute, RemoteRouteCounters> {
  const r = {} as Record<RemoteRoute, RemoteRouteCounters>;
  for (const k of REMOTE_ROUTES) r[k] = { operations: 0, errors: 0, requests: 0, retries: 0, bytes: 0, seconds: 0 };
  return r;
}

/** A set of counters. */
export class RemoteStatsBook {
  #routes = empty();
  #probes = 0;

  record(op: RemoteOpRecord): void {
    const c = this.#routes[op.route];
    c.operations += 1;
    if (op.failed) c.errors += 1;
    c.requests += op.requests;
    c.retries += op.retries;
    c.bytes += op.bytes;
    c.seconds += op.seconds;
  }

  recordProbe(requests: number): void {
    this.#probes += requests;
  }

  snapshot(): RemoteStatsSnapshot {
    const routes = {} as Record<RemoteRoute, RemoteRouteCounters>;
    for (const k of REMOTE_ROUTES) routes[k] = { ...this.#routes[k] };
    return { routes, probeRequests: this.#probes };
  }

  reset(): void {
    this.#routes = empty();
    this.#probes = 0;
  }
}

/** Process-wide counters of remote reads. */
export const globalRemoteStats = new RemoteStatsBook();

/** Process-wide remote reads by route. */
export function remoteStats(): RemoteStatsSnapshot {
  return globalRemoteStats.snapshot();
}

/** Zeroes the process-wide remote counters. */
export function resetRemoteStats(): void {
  globalRemoteStats.reset();
}
