/**
 * Every procfs, sysfs, /run, /etc and /dev read the doctor makes goes through one `SysRoot`, so
 * that a recorded tree of those files (a test fixture, or a copy taken from another machine)
 * can stand in for the live system. Reads never throw: a missing or unreadable file is data.
 */
import fs from 'node:fs';
import path from 'node:path';

const posix = path.posix;

export class SysRoot {
  /** The directory that stands for `/`. */
  readonly base: string;

  constructor(base = '/') {
    this.base = path.resolve(base);
  }

  /** Whether this is the live system (so real syscalls on the paths make sense). */
  get live(): boolean {
    return this.base === '/';
  }

  /** The host path of an absolute path inside the root. */
  hostPath(p: string): string {
    return this.live ? p : path.join(this.base, posix.normalize('/' + p));
  }

  /** The file's text, or undefined when it does not exist or cannot be read. */
  text(p: string): string | undefined {
    try {
      return fs.readFileSync(this.hostPath(p), 'utf8');
    } catch {
      return undefined;
    }
  }

  /** The file's text with surrounding whitespace removed. */
  line(p: string): string | undefined {
    return this.text(p)?.trim();
  }

  /** The file's bytes, or the error code that prevented reading them. */
  bytes(p: string): { data?: Buffer; error?: string } {
    try {
      return { data: fs.readFileSync(this.hostPath(p)) };
    } catch (err) {
      return { error: (err as NodeJS.ErrnoException).code ?? 'EIO' };
    }
  }

  exists(p: string): boolean {
    try {
      fs.lstatSync(this.hostPath(p));
      return true;
    } catch {
      return false;
    }
  }

  /** Entry names of a directory (empty when it does not exist). */
  list(p: string): string[] {
    try {
      return fs.readdirSync(this.hostPath(p)).sort();
    } catch {
      return [];
    }
  }

  /**
   * Where a sysfs link points, as an absolute path inside the root. The target is resolved as
   * text, so a recorded tree needs only the links, not every directory they lead to. A regular
   * file holding the target path is accepted too, for trees copied by tools that drop links.
   */
  link(p: string): string | undefined {
    const host = this.hostPath(p);
    let target: string;
    try {
      const st = fs.lstatSync(host);
      if (st.isSymbolicLink()) target = fs.readlinkSync(host);
      else if (st.isFile() && !this.live) target = fs.readFileSync(host, 'utf8').trim();
      else return undefined;
    } catch {
      return undefined;
    }
    return posix.resolve(posix.dirname(posix.normalize('/' + p)), target);
  }
}
