/**
 * How a `penstock` command ends when it is not let finish: the reader of its output goes away
 * (`penstock inspect … | head`), or it is stopped by SIGINT or SIGTERM. Either way the temporary
 * files it made are removed first; a closed reader is a normal end (status 0, nothing printed),
 * a signal ends it with 128 + the signal's number.
 */

const cleanups = new Set<() => void>();

/**
 * Runs `fn` (synchronously) if the process is ended early; the returned function unregisters it.
 * For the removal of temporary files: register right before creating them.
 */
export function onEarlyEnd(fn: () => void): () => void {
  cleanups.add(fn);
  return () => cleanups.delete(fn);
}

function runCleanups(): void {
  for (const fn of [...cleanups]) {
    cleanups.delete(fn);
    try {
      fn();
    } catch {
      // Ending anyway: one failed removal must not keep the others from running.
    }
  }
}

/** Removes what was registered and exits with `status`. */
export function endEarly(status: number): never {
  runCleanups();
  process.exit(status);
}

/** Exit statuses for the signals a command handles: 128 + the signal's number. */
export const SIGNAL_EXITS = { SIGINT: 130, SIGTERM: 143 } as const;

let installed = false;

/**
 * Installs the handlers once: EPIPE on stdout or stderr ends the process quietly with status 0
 * (anything else that breaks the stream is rethrown), SIGINT and SIGTERM remove the registered
 * files and exit with 130 and 143.
 */
export function installEarlyEnds(): void {
  if (installed) return;
  installed = true;
  const onStreamError = (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE') endEarly(0);
    throw err;
  };
  process.stdout.on('error', onStreamError);
  process.stderr.on('error', onStreamError);
  for (const [signal, status] of Object.entries(SIGNAL_EXITS)) process.on(signal, () => endEarly(status));
}
