/**
 * Small host reads on the calling thread, when the page cache holds every byte: one non-blocking
 * `preadv2(RWF_NOWAIT)`, which fails rather than wait for the disk. It skips the pool's queue,
 * a worker's wake-up and the hand-back to the JS thread, which cost several times the read
 * itself at 4 KiB. Anything it cannot finish (bytes not cached, end of file, an error) goes to
 * the pool as before, so the result is the same either way.
 */
import { performance } from 'node:perf_hooks';
import { native } from '../addon/binding.js';
import type { HostRegion } from '../memory/host-memory.js';
import type { InlineDeviceSplit } from '../plan/transfer-way.js';

/** The outcome of one attempt. */
export type CachedRead =
  /** Every byte was read here, taking `ns` nanoseconds; `helped` pieces of it by pool workers. */
  | { bytes: number; ns: number; helped?: number }
  /** Not here: let the pool read it. */
  | 'pool'
  /** This file (its file system) does not support non-blocking reads: stop trying. */
  | 'unsupported';

/** errno values that say the kernel or file system has no RWF_NOWAIT (rather than "not cached"). */
const UNSUPPORTED = new Set([95 /* EOPNOTSUPP */, 22 /* EINVAL */, 38 /* ENOSYS */]);

/** Reads `size` bytes at `fileOffset` into `host` at `offset`, if the page cache has them all. */
export function readCached(fd: number, host: HostRegion, offset: number, size: number, fileOffset: number): CachedRead {
  const t0 = performance.now();
  return outcome(native().readCached(fd, host.view, host.offset + offset, size, fileOffset), size, t0);
}

/** Where the addon says how many pieces of the last read helpers read (one per process: reads here are synchronous). */
const report = new Uint32Array(1);

/**
 * Reads `size` bytes at `fileOffset` into GPU memory at `devicePtr` on the calling thread, if
 * the page cache has them all: through the device's inline staging in pieces, with the pool's
 * spinning workers helping to read them as `split` says (transfer-plan.ts `inlineDeviceSplit`),
 * each finished run of pieces copied while the rest are read, all of it waited for here.
 */
export function readCachedToDevice(fd: number, device: number, devicePtr: bigint, size: number, fileOffset: number, split: InlineDeviceSplit): CachedRead {
  const t0 = performance.now();
  const { piece, helpers, scratch } = split;
  report[0] = 0;
  const r = outcome(native().readCachedToDevice(fd, device, devicePtr, size, fileOffset, piece, helpers, scratch, report), size, t0);
  if (typeof r === 'object' && helpers > 0) r.helped = report[0]!;
  return r;
}

/** What the native answer `r` (bytes, or -errno) to a read of `size` bytes started at `t0` means. */
function outcome(r: number, size: number, t0: number): CachedRead {
  if (r === size) return { bytes: r, ns: Math.round((performance.now() - t0) * 1e6) };
  // A short count is either the end of the file or a page that was not cached (or, into a GPU,
  // the staging in use by another thread): the pool reads it again in full and tells which.
  if (r < 0 && UNSUPPORTED.has(-r)) return 'unsupported';
  return 'pool';
}
