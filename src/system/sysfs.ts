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

  /**
   * The host path of an absolute path inside the root. In a recorded root, symbolic links met on
   * the way (say `etc/cufile.json` → `/etc/alternatives/cufile.json`) are followed inside the
   * root, as the recorded machine would have followed them, never out to this machine's files.
   * With `keepLast` the last component is not followed (for reading a link itself).
   */
  hostPath(p: string, keepLast = false): string {
    if (this.live) return p;
    const parts = posix.normalize('/' + p).split('/').filter(Boolean);
    let cur: string[] = [];
    for (let hops = 0, i = 0; i < parts.length; i++) {
      const name = parts[i]!;
      if (name === '..') {
        cur.pop();
        continue;
      }
      const next = [...cur, name];
      const host = path.join(this.base, ...next);
      let target: string | undefined;
      if (!(keepLast && i === parts.length - 1)) {
        try {
          if (fs.lstatSync(host).isSymbolicLink()) target = fs.readlinkSync(host);
        } catch {
          // A missing component: the rest of the path is missing too, which the caller finds out.
        }
      }
      if (target === undefined) {
        cur = next;
        continue;
      }
      // A loop of links fails, as it does for the kernel (ELOOP): a NUL byte makes every fs call
      // on the result throw, so it reads as missing and never escapes to this machine's files.
      if (++hops > 40) return path.join(this.base, '\0ELOOP');
      const rest = parts.slice(i + 1);
      const targetParts = target.split('/').filter(Boolean);
      parts.splice(0, parts.length, ...(target.startsWith('/') ? [] : cur), ...targetParts, ...rest);
      cur = [];
      i = -1;
    }
    return path.join(this.base, ...cur);
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
      fs.lstatSync(this.hostPath(p, true));
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
    const host = this.hostPath(p, true);
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
