/**
 * Dropping a file's pages from the page cache, so that the next read comes from the disk.
 *
 * The per-file way is posix_fadvise(POSIX_FADV_DONTNEED) over the whole file, through penstock's
 * addon. DONTNEED skips dirty pages, hence the fsync first. Where pages stay behind and the
 * process runs as root, the whole page cache can be dropped as well. Residency is checked
 * afterwards (mincore over 1024 pages sampled evenly), so a cold number never rests on an
 * unverified drop.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { native } from '../../addon/binding.js';

/** `auto`: per-file, then the global drop only if pages remain; `drop-caches`: always both. */
export type DropPolicy = 'auto' | 'fadvise' | 'drop-caches';

export interface DropResult {
  /** How the pages were dropped, in words (for reports). */
  method: string;
  /** False when pages demonstrably stayed, or nothing could be tried. */
  dropped: boolean;
  /** Whether residency was checked (mincore sampling). */
  verified: boolean;
  residentBefore?: number;
  residentAfter?: number;
  problems: string[];
}

/** Bytes of `file` in the page cache (estimated from 1024 sampled pages), or undefined where it cannot tell. */
export function residentBytes(file: string): number | undefined {
  const fd = fs.openSync(file, 'r');
  try {
    const size = fs.fstatSync(fd).size;
    if (size === 0) return 0;
    const fraction = native().residency(fd, 0, size, 1024);
    return fraction < 0 ? undefined : Math.round(fraction * size);
  } finally {
    fs.closeSync(fd);
  }
}

export function isRoot(): boolean {
  return typeof process.getuid === 'function' && process.getuid() === 0;
}

function fsyncFile(file: string): void {
  const fd = fs.openSync(file, 'r');
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

function fadviseDontNeed(file: string): string | undefined {
  const fd = fs.openSync(file, 'r');
  try {
    native().dropCache(fd);
    return undefined;
  } catch (err) {
    return `posix_fadvise(DONTNEED) failed (${(err as { code?: string }).code ?? String(err)})`;
  } finally {
    fs.closeSync(fd);
  }
}

function dropAllCaches(): string | undefined {
  spawnSync('sync');
  try {
    // 1 = clean page cache only; dentries and inodes stay, so later opens are not slowed.
    fs.writeFileSync('/proc/sys/vm/drop_caches', '1');
    return undefined;
  } catch (err) {
    return `writing /proc/sys/vm/drop_caches failed (${(err as NodeJS.ErrnoException).code ?? String(err)})`;
  }
}

/** Small leftovers (a page or two being read ahead by someone else) do not make a read warm. */
function leftoverOk(resident: number, size: number): boolean {
  return resident <= Math.max(64 * 1024, size * 0.01);
}

export function dropFilePages(file: string, policy: DropPolicy = 'auto'): DropResult {
  const size = fs.statSync(file).size;
  const problems: string[] = [];
  const methods: string[] = [];
  const residentBefore = residentBytes(file);
  try {
    fsyncFile(file);
  } catch (err) {
    problems.push(`fsync failed (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
  }
  const fadviseProblem = fadviseDontNeed(file);
  if (fadviseProblem) problems.push(fadviseProblem);
  else methods.push('posix_fadvise(DONTNEED)');
  let after = residentBytes(file);
  const stillThere = after === undefined ? fadviseProblem !== undefined : !leftoverOk(after, size);
  if (policy === 'drop-caches' || (policy === 'auto' && stillThere)) {
    if (isRoot()) {
      const p = dropAllCaches();
      if (p) problems.push(p);
      else methods.push('sync + echo 1 > /proc/sys/vm/drop_caches');
      after = residentBytes(file);
    } else if (policy === 'drop-caches') {
      problems.push('dropping all caches needs root');
    }
  }
  const verified = after !== undefined;
  const dropped = after !== undefined ? leftoverOk(after, size) : methods.length > 0;
  const r: DropResult = { method: methods.length ? methods.join(' + ') : 'none', dropped, verified, problems };
  if (residentBefore !== undefined) r.residentBefore = residentBefore;
  if (after !== undefined) r.residentAfter = after;
  return r;
}

/** One sentence for reports: the method, and whether the residency check confirmed it. */
export function describeDrop(d: DropResult): string {
  const check = d.verified ? `verified with mincore: about ${d.residentAfter} bytes left resident` : 'not verified (residency unknown)';
  const extra = d.problems.length ? `; ${d.problems.join('; ')}` : '';
  return `${d.method} (${d.dropped ? check : `pages stayed: ${check}`})${extra}`;
}
