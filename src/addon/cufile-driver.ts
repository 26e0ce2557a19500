/**
 * cuFile in this process: whether its driver is to be opened at all (plan/cufile-open.ts, from
 * facts that cost well under a millisecond), opening it in the background where it may pay back
 * so that staged reads start meanwhile, and what a file may expect of it right now.
 */
import { native, type CuFileGpuCounters, type CuFileStatus } from './binding.js';
import { cudaUnavailableReason, hasGpu } from './runtime.js';
import { currentSettings } from '../settings/current.js';
import type { CompatMode } from '../settings/table.js';
import { planCuFileOpen, type CuFileOpenPlan } from '../plan/cufile-open.js';
import { cufileDirectPathFacts, type CuFileDirectPathFacts } from '../system/cufile-outlook.js';
import { SysRoot } from '../system/sysfs.js';
import { cufileOpening, cufileUnavailableReason, type Reason } from '../vocabulary/reasons.js';

let facts: { root: string; facts: CuFileDirectPathFacts } | undefined;
let opening: Promise<void> | undefined;

/** The machine's facts for cuFile's direct path, read once per process (again if `systemRoot` changes). */
export function cufileFacts(): CuFileDirectPathFacts {
  const root = currentSettings().systemRoot;
  if (facts?.root !== root) facts = { root, facts: cufileDirectPathFacts(process.env, new SysRoot(root)) };
  return facts.facts;
}

/** The plan for cuFile's driver under `compatMode` (the setting in force by default). */
export function cufileOpenPlan(compatMode: CompatMode = currentSettings().compatMode): CuFileOpenPlan {
  return planCuFileOpen(compatMode, cufileFacts());
}

/** cuFile's state as it is now: loaded or not, its driver open, opening, failed or never tried. Never opens it. */
export function cufileStatus(): CuFileStatus {
  return native().cufileStatus();
}

/** cuFile's status with the library loaded (never opens the driver). */
export function loadCufile(): CuFileStatus {
  return loaded();
}

function loaded(): CuFileStatus {
  const n = native();
  const s = n.cufileStatus();
  return s.path ? s : n.cufileLoad(currentSettings().cufileLibrary);
}

/**
 * Starts what the plan says for cuFile's driver: nothing (`never`), the open on a background
 * thread (`background`), or the open here and now (`now`). Idempotent; never throws.
 */
export function startCufile(compatMode: CompatMode, ordinal = 0): void {
  const plan = cufileOpenPlan(compatMode);
  if (plan.open === 'never' || !hasGpu()) return;
  const s = loaded();
  if (!s.loaded || s.driverOpen || s.driverError) return;
  if (plan.open === 'now') {
    native().cufileDriverOpen(ordinal);
    return;
  }
  // A failed open shows in the status (driverError); the promise has nothing more to say.
  opening ??= native().cufileDriverOpenAsync(ordinal).catch(() => undefined);
}

/** Resolves once a background open of cuFile's driver (if one was started) has finished. */
export function cufileSettled(): Promise<void> {
  return opening ?? Promise.resolve();
}

/**
 * What cuFile offers a file under `compatMode` now: `ready`, or why not — `final` when that will
 * not change (not opened by plan, not loadable, failed), not final while its driver opens.
 */
export function cufileAccess(compatMode: CompatMode): { ready: true } | { ready: false; reason: Reason; final: boolean } {
  const plan = cufileOpenPlan(compatMode);
  if (plan.open === 'never') return { ready: false, reason: plan.reason, final: true };
  if (!hasGpu()) return { ready: false, reason: cufileUnavailableReason(loaded(), cudaUnavailableReason())!, final: true };
  startCufile(compatMode);
  const s = cufileStatus();
  // Queued but not begun yet shows as neither open nor failed: still opening, as far as a file knows.
  const tried = s.driverOpen || s.driverError !== undefined || !s.loaded;
  if (s.driverOpening || (opening && !tried)) return { ready: false, reason: cufileOpening(), final: false };
  const why = cufileUnavailableReason(s, undefined);
  return why ? { ready: false, reason: why, final: true } : { ready: true };
}

/**
 * Opens cuFile's driver now, whatever the plan says, to describe it (`penstock doctor`): the
 * status with its properties. Costs what the open costs.
 */
export function openCufileToDescribe(): CuFileStatus {
  const s = loaded();
  if (!s.loaded || !hasGpu() || s.driverOpen || s.driverError) return s;
  return native().cufileDriverOpen(0);
}

/** Per-operation evidence from cuFile's level-3 counters, summed over GPUs. */
export interface CuFileEvidence {
  direct: number;
  posix: number;
}

/** Level-3 counters summed over GPUs, or null where cuFile keeps none. */
export function cufileEvidence(write: boolean): CuFileEvidence | null {
  const s = cufileStatus();
  if (!s.driverOpen || s.statsLevel < 3) return null;
  const gpus: CuFileGpuCounters[] | null = native().cufileStats();
  if (!gpus) return null;
  let direct = 0;
  let posix = 0;
  for (const g of gpus) {
    direct += write ? g.nvfsWrites : g.nvfsReads + g.p2pReads;
    posix += write ? g.posixWrites : g.posixReads;
  }
  return { direct, posix };
}
