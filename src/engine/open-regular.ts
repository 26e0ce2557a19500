/**
 * Opening a path that must be a regular file, without ever blocking on one that is not. A plain
 * open(2) of a FIFO waits for a writer (or reader) forever, on a thread that neither an
 * AbortSignal nor process exit can end; a character device or socket has no size and no
 * offsets. So the path is first opened non-blocking (which returns at once for every kind of
 * file), checked with fstat, and only a regular file is then opened for real, through the
 * descriptor already held (its /proc/self/fd link), so that the file checked is the file used.
 */
import fs from 'node:fs';
import { promisify } from 'node:util';
import { systemError, usage, type PenstockUsageError } from '../vocabulary/errors.js';

const openAsync = promisify(fs.open);
const closeAsync = promisify(fs.close);
const fstatAsync = promisify(fs.fstat);
const statAsync = promisify(fs.stat);

const { O_NONBLOCK, O_NOCTTY, O_CREAT, O_EXCL, O_TRUNC } = fs.constants;

/** What a non-regular file is, in words. */
function kindOf(st: fs.Stats): string {
  if (st.isFIFO()) return 'a FIFO (named pipe)';
  if (st.isCharacterDevice()) return 'a character device';
  if (st.isBlockDevice()) return 'a block device';
  if (st.isSocket()) return 'a socket';
  if (st.isDirectory()) return 'a directory';
  return 'not a regular file';
}

function notRegular(path: string, st: fs.Stats): PenstockUsageError {
  return usage('ERR_PENSTOCK_NOT_REGULAR_FILE', `${path} is ${kindOf(st)}, not a regular file: penstock reads and writes regular files only`);
}

function eisdir(path: string): Error {
  return systemError(Object.assign(new Error(`EISDIR: illegal operation on a directory, open '${path}'`), { code: 'EISDIR', errno: -21, syscall: 'open', path }));
}

/**
 * Opens `path` with `flags` (O_* bits) and `mode`; resolves to a descriptor of a regular file.
 * A directory is `EISDIR` (as Node says it); a FIFO, device or socket is
 * `ERR_PENSTOCK_NOT_REGULAR_FILE`, found without blocking. OS errors keep their codes.
 */
export async function openRegularFile(path: string, flags: number, mode = 0o644): Promise<number> {
  let probe: number;
  try {
    probe = await openAsync(path, flags | O_NONBLOCK | O_NOCTTY, mode);
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    // A socket cannot be opened at all, and a FIFO without a reader cannot be opened for writing
    // without blocking (ENXIO for both): say what the path is rather than what open said.
    if (e.code === 'ENXIO') {
      const st = await statAsync(path).catch(() => undefined);
      if (st && !st.isFile()) throw notRegular(path, st);
    }
    throw systemError(e);
  }
  let st: fs.Stats;
  try {
    st = await fstatAsync(probe);
  } catch (err) {
    await closeAsync(probe).catch(() => undefined);
    throw systemError(err as NodeJS.ErrnoException);
  }
  if (!st.isFile()) {
    await closeAsync(probe).catch(() => undefined);
    throw st.isDirectory() ? eisdir(path) : notRegular(path, st);
  }
  // O_NONBLOCK means nothing to read(2) of a regular file, but io_uring answers EAGAIN for such
  // descriptors rather than wait for the disk: the descriptor kept is opened again without it,
  // through the probe's /proc/self/fd link, which names the inode just checked whatever the path
  // names by now. Creation and truncation were done by the first open and are not repeated.
  // Without /proc (some sandboxes) the probe itself is kept: correct, only less quick.
  let fd: number;
  try {
    fd = await openAsync(`/proc/self/fd/${probe}`, flags & ~(O_CREAT | O_EXCL | O_TRUNC));
  } catch {
    return probe;
  }
  const same = await fstatAsync(fd).then((s2) => s2.dev === st.dev && s2.ino === st.ino, () => false);
  await closeAsync(same ? probe : fd);
  return same ? fd : probe;
}
