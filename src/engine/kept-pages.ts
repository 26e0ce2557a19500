/**
 * Kept pages: the policy of which file ranges keep their page-cache pages registered with CUDA
 * between reads (kept_pages.cc does the registering and the reads). A read of a kept range is
 * one copy by the GPU straight out of the page cache, with no CPU copy into staging, so it runs
 * at the copy engine's rate at every size. Registering costs more than a staged read and pins
 * the pages, so only a range read into a GPU again from the same open file is kept, within one
 * process-wide budget (`keptPagesMax`), least recently read first out.
 */
import { performance } from 'node:perf_hooks';
import { native } from '../addon/binding.js';
import type { Settings } from '../settings/config.js';
import type { KeptPlan } from '../plan/transfer-way.js';
import { keptPagesNotCached, keptPagesPastEnd, keptPagesRecent, keptPagesRefused, keptPagesStale, type Reason } from '../vocabulary/reasons.js';

const KiB = 1024;
const MiB = KiB * KiB;

/**
 * Reads smaller than this never keep pages: below it a staged or inline read costs little more
 * than the copy, and many small pinned ranges would fill the budget with bookkeeping.
 */
export const KEPT_MIN_READ = 1 * MiB;

/**
 * A file changed this recently (its modification or change time) is not kept: the kernel's file
 * times move in coarse ticks, so a change right after the registration could leave them as they
 * were, and only a changed stamp tells a kept range that its pages may no longer be the file's.
 */
export const KEPT_SETTLE_MS = 1000;

/**
 * The task size of a read of kept pages: one copy. Cut into 2 to 16 copies on as many workers'
 * streams, reads of 4 to 256 MiB ran no faster on an H200 (docs/performance.md), and a
 * registering read must be one task anyway.
 */
export function keptTaskSize(size: number): number {
  return size;
}

/** Ranges read into a GPU that a file remembers, to see one read again. */
const SEEN_RANGES = 16;

const PAGE = 4 * KiB;

/** Bytes a range pins: whole pages. */
function pinnedSpan(fileOffset: number, size: number): number {
  return Math.ceil((fileOffset + size) / PAGE) * PAGE - Math.floor(fileOffset / PAGE) * PAGE;
}

interface KeptEntry {
  id: number;
  owner: KeptFile;
  fileOffset: number;
  size: number;
  bytes: number;
  /** Registered: false until the read that registers it has succeeded. */
  ready: boolean;
}

/** Every kept range of the process, least recently read first (a Map keeps insertion order). */
const kept = new Map<number, KeptEntry>();
let keptTotal = 0;
let nextId = 1;

function drop(e: KeptEntry): void {
  if (!kept.delete(e.id)) return;
  keptTotal -= e.bytes;
  e.owner.forget(e);
  native().keptRelease(e.id);
}

/** Bytes of pinned page-cache pages that kept ranges hold (and reserve), process-wide. */
export function keptPagesBytes(): number {
  return keptTotal;
}

/** Releases least recently read ranges until at most `max` bytes are kept. */
export function trimKeptPages(max: number): void {
  for (const e of kept.values()) {
    if (keptTotal <= max) return;
    if (e.ready) drop(e);
  }
}

/** The codes with which the addon refuses a kept read before any byte moves, and the reason each is. */
const KEPT_REFUSALS: Record<string, () => Reason> = {
  ERR_PENSTOCK_KEPT_STALE: keptPagesStale,
  ERR_PENSTOCK_KEPT_RECENT: () => keptPagesRecent(KEPT_SETTLE_MS),
  ERR_PENSTOCK_KEPT_PAST_END: keptPagesPastEnd,
};

/** One open file's kept ranges and the reads that may lead to more. */
export class KeptFile {
  #entries = new Set<KeptEntry>();
  #seen: string[] = [];
  #notBefore = 0;
  /** Set once a registration failed: this file keeps nothing more. */
  refused: Reason | undefined;

  /**
   * What a read into a GPU of `size` bytes at `fileOffset` is to do with kept pages, if
   * anything: read a kept range that covers it; or register this range, read once before, when
   * `residency()` (the share of its pages in the page cache) says all of them are there; or go
   * the usual way, remembering the range (undefined), or with the reason it was not kept.
   * Kept pages are for data in memory: cold data is read from storage the usual way, and a
   * benchmark or a user that drops a file's pages can still do so.
   */
  plan(s: Readonly<Settings>, fileOffset: number, size: number, residency: () => number): KeptPlan | Reason | undefined {
    if (this.refused || size < KEPT_MIN_READ || s.keptPagesMax === 0) return undefined;
    for (const e of this.#entries) {
      if (fileOffset < e.fileOffset || fileOffset + size > e.fileOffset + e.size) continue;
      if (!e.ready) return undefined;  // its registration is still in flight
      kept.delete(e.id);  // most recently read now
      kept.set(e.id, e);
      return { id: e.id, keep: false, issue: true };
    }
    const key = `${fileOffset}:${size}`;
    if (!this.#seen.includes(key)) {
      this.#seen.push(key);
      if (this.#seen.length > SEEN_RANGES) this.#seen.shift();
      return undefined;
    }
    const bytes = pinnedSpan(fileOffset, size);
    if (bytes > s.keptPagesMax || performance.now() < this.#notBefore) return undefined;
    if (residency() < 1) return keptPagesNotCached();
    trimKeptPages(s.keptPagesMax - bytes);
    if (keptTotal + bytes > s.keptPagesMax) return undefined;  // the rest are in flight
    const e: KeptEntry = { id: nextId++, owner: this, fileOffset, size, bytes, ready: false };
    kept.set(e.id, e);
    keptTotal += bytes;
    this.#entries.add(e);
    return { id: e.id, keep: true, issue: false };
  }

  /** A read by `p` succeeded: a registered range is now kept. */
  succeeded(p: KeptPlan): void {
    const e = kept.get(p.id);
    if (e) e.ready = true;
  }

  /**
   * A read by `p` failed with `code`: the range is released, and the reason returned when the
   * read is to go the usual way instead (undefined: the error is the read's own).
   */
  failed(p: KeptPlan, err: unknown): Reason | undefined {
    const e = kept.get(p.id);
    if (e) drop(e);
    const { code, syscall, call, message } = err as { code?: unknown; syscall?: unknown; call?: unknown; message?: unknown };
    const known = typeof code === 'string' && Object.hasOwn(KEPT_REFUSALS, code) ? KEPT_REFUSALS[code] : undefined;
    if (known) {
      if (code === 'ERR_PENSTOCK_KEPT_RECENT') this.#notBefore = performance.now() + KEPT_SETTLE_MS;
      return known();
    }
    // What the pages themselves can fail at: being mapped, or being pinned.
    if (p.keep && (syscall === 'mmap' || call === 'cuMemHostRegister' || code === 'ERR_PENSTOCK_MAPPED_UNAVAILABLE'))
      return (this.refused = keptPagesRefused(String(code), String(message)));
    return undefined;
  }

  /** Releases every range of this file (it is closing). */
  release(): void {
    for (const e of [...this.#entries]) drop(e);
    this.#seen = [];
  }

  /** @internal Called by the process-wide list as it drops `e`. */
  forget(e: KeptEntry): void {
    this.#entries.delete(e);
  }
}

/** The settle time native code checks a registration against, in nanoseconds. */
export const KEPT_SETTLE_NS = KEPT_SETTLE_MS * 1e6;
