/**
 * Whether, and how, cuFile's driver is opened: decided from facts that cost well under a
 * millisecond (src/system/cufile-outlook.ts), before the open itself, which costs hundreds of
 * milliseconds and pays back only where cuFile can move data directly.
 */
import type { CompatMode } from '../settings/table.js';
import type { CuFileDirectPathFacts } from '../system/cufile-outlook.js';
import { compatModeOn, cufileCompatForced, cufileNoDirectPath, type Reason } from '../vocabulary/reasons.js';

/**
 * - `now`: opened before the first device operation goes on (compatMode 'off': cuFile is
 *   required, so nothing may run without it).
 * - `background`: opened on another thread while staged operations start meanwhile; operations
 *   that start once it is open go to cuFile.
 * - `never`: not opened, with the reason.
 */
export type CuFileOpenPlan = { open: 'now' } | { open: 'background' } | { open: 'never'; reason: Reason };

/** The plan for a file under `compatMode` on a machine with `facts`. */
export function planCuFileOpen(compatMode: CompatMode, facts: CuFileDirectPathFacts): CuFileOpenPlan {
  if (compatMode === 'on') return { open: 'never', reason: compatModeOn() };
  if (compatMode === 'off') return { open: 'now' };
  if (facts.forcedCompat) return { open: 'never', reason: cufileCompatForced(facts.forcedCompat) };
  if (!facts.nvidiaFs && !facts.p2pdma) return { open: 'never', reason: cufileNoDirectPath(facts.config) };
  return { open: 'background' };
}
