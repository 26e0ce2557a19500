/**
 * `configure()`'s effect on the running engine: a change is refused while it would pull memory
 * from under operations in flight or name a library already loaded, and a smaller kept-pages
 * budget releases pages at once.
 */
import { native } from '../addon/binding.js';
import { validate, type Settings } from '../settings/config.js';
import { currentSettings, replaceSettings } from '../settings/current.js';
import { usage } from '../vocabulary/errors.js';
import { trimKeptPages } from './kept-pages.js';

/**
 * Changes settings; returns the full settings now in force. Pool size and bounce-buffer size
 * can change only while no operation is in flight; library paths only before they are loaded.
 */
export function configure(changes: Partial<Settings>): Readonly<Settings> {
  const next = validate({ ...currentSettings(), ...changes });
  const cur = currentSettings();
  const n = native();
  if ((next.threads !== cur.threads || next.bounceBufferSize !== cur.bounceBufferSize) && n.inflight() > 0)
    throw usage('ERR_PENSTOCK_BUSY', 'threads and bounceBufferSize cannot change while operations are in flight');
  if (next.cudaLibrary !== cur.cudaLibrary && n.cudaStatus().path)
    throw usage('ERR_PENSTOCK_ALREADY_LOADED', `The CUDA driver was already loaded from ${n.cudaStatus().path}`);
  if (next.cufileLibrary !== cur.cufileLibrary && n.cufileStatus().path)
    throw usage('ERR_PENSTOCK_ALREADY_LOADED', `cuFile was already loaded from ${n.cufileStatus().path}`);
  replaceSettings(next);
  // A smaller maximum releases the least recently read ranges now, not at the next read.
  if (next.keptPagesMax < cur.keptPagesMax) trimKeptPages(next.keptPagesMax);
  return next;
}
