/**
 * Temporary files for the CLI that nobody else can plant, swap or read: each lives in a fresh
 * `mkdtemp` directory (mode 0700) and is created with O_EXCL | O_NOFOLLOW (mode 0600), and removing
 * it removes only that file and that directory.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** Flags that create a new file and never follow or reuse what is at the path. */
export const CREATE_EXCLUSIVE = fs.constants.O_CREAT | fs.constants.O_EXCL | fs.constants.O_NOFOLLOW | fs.constants.O_WRONLY;

/** Mode of the files the CLI creates: the owner's only. */
export const PRIVATE_MODE = 0o600;

/** A private directory and the name of the one file in it that this process may create. */
export interface PrivateDir {
  /** The directory (created by this process). */
  readonly dir: string;
  /** The file's path inside it (not yet created). */
  readonly path: string;
  /** Removes the file (if it was created) and the directory, nothing else; safe to call twice. */
  remove(): void;
}

/** A private file, already created and open for writing. */
export interface PrivateFile extends PrivateDir {
  /** The descriptor open for writing (-1 once closed). */
  readonly fd: number;
  /** Closes the descriptor (the file stays until `remove()`). */
  closeFd(): void;
}

/** Creates a fresh private directory `<base>/<prefix>XXXXXX` for a file called `name`. */
export function createPrivateDir(prefix: string, name: string, base = os.tmpdir()): PrivateDir {
  const dir = fs.mkdtempSync(path.join(base, prefix));
  const file = path.join(dir, name);
  let removed = false;
  return {
    dir,
    path: file,
    remove() {
      if (removed) return;
      removed = true;
      fs.rmSync(file, { force: true });
      try {
        fs.rmdirSync(dir);
      } catch {
        // Not empty means something this process did not create is inside: leave it.
      }
    },
  };
}

/** Creates a fresh private directory and, inside it, the file `name` (O_EXCL | O_NOFOLLOW, 0600). */
export function createPrivateFile(prefix: string, name: string, base = os.tmpdir()): PrivateFile {
  const d = createPrivateDir(prefix, name, base);
  let fd: number;
  try {
    fd = fs.openSync(d.path, CREATE_EXCLUSIVE, PRIVATE_MODE);
  } catch (e) {
    d.remove();
    throw e;
  }
  const closeFd = () => {
    if (fd >= 0) fs.closeSync(fd);
    fd = -1;
  };
  return {
    dir: d.dir,
    path: d.path,
    get fd() {
      return fd;
    },
    closeFd,
    remove() {
      closeFd();
      d.remove();
    },
  };
}
