/**
 * Retries of transient failures: exponential backoff with full jitter (a random delay up to
 * base × 2^attempt, capped), so many connections that failed together do not return together;
 * a server's Retry-After is waited out (up to the same cap).
 */
import { AbortError } from '../../vocabulary/errors.js';
import { RemoteError } from './errors.js';

/** Longest single delay between attempts. */
const MAX_DELAY_MS = 20_000;

/** The delay before retry number `attempt` (1-based). */
export function backoffMs(attempt: number, baseMs: number, random: () => number = Math.random): number {
  const ceiling = Math.min(MAX_DELAY_MS, baseMs * 2 ** Math.min(30, attempt - 1));
  return Math.floor(random() * ceiling);
}

/**
 * The delay before retry number `attempt`: the jittered backoff, or longer when the server asked
 * for it (Retry-After), never more than the cap.
 */
export function retryDelayMs(attempt: number, baseMs: number, retryAfterMs: number | undefined, random: () => number = Math.random): number {
  return Math.min(MAX_DELAY_MS, Math.max(backoffMs(attempt, baseMs, random), retryAfterMs ?? 0));
}

/** Waits `ms`, or rejects with an AbortError when `signal` fires first. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(new AbortError(undefined, { cause: signal.reason }));
    const onAbort = () => {
      clearTimeout(t);
      reject(new AbortError(undefined, { cause: signal?.reason }));
    };
    const t = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** Counts of one retried call. */
export interface Attempts {
  requests: number;
  retries: number;
}

/**
 * Runs `attempt` until it succeeds, fails for good, or `retries` repeats have failed transiently;
 * the error then says how many requests were made.
 */
export async function withRetries<T>(
  attempt: (n: number) => Promise<T>,
  opts: { retries: number; baseMs: number; signal?: AbortSignal; counts: Attempts; onRetry?: () => void },
): Promise<T> {
  for (let n = 1; ; n++) {
    opts.counts.requests++;
    try {
      return await attempt(n);
    } catch (e) {
      if (!(e instanceof RemoteError)) throw e;
      if (!e.transient || n > opts.retries) throw n > 1 ? e.withAttempts(n) : e;
      opts.counts.retries++;
      opts.onRetry?.();
      await sleep(retryDelayMs(n, opts.baseMs, e.retryAfterMs), opts.signal);
    }
  }
}
