/**
 * Where the daemon listens, made safe before it binds: the socket's folder must belong to this
 * user and let nobody else write to it (nor, unless other users are served, enter it), and a
 * socket path another daemon still answers on is refused instead of taken over.
 */
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { systemError, usage } from '../vocabulary/errors.js';

/**
 * The socket path used when none is given: `$XDG_RUNTIME_DIR/penstock/serve.sock`, else
 * `/tmp/penstock-<uid>/serve.sock`.
 */
export function defaultSocketPath(env: NodeJS.ProcessEnv = process.env): string {
  const runtime = env.XDG_RUNTIME_DIR;
  if (runtime && path.isAbsolute(runtime)) return path.join(runtime, 'penstock', 'serve.sock');
  return path.join(os.tmpdir(), `penstock-${process.getuid?.() ?? 'user'}`, 'serve.sock');
}

function unsafe(message: string): never {
  throw usage('ERR_PENSTOCK_SERVE_UNSAFE_DIR', message);
}

/**
 * Makes the socket's folder (mode 0700) when it is missing, and checks it: a real directory owned
 * by this user, never writable by others, and closed to others unless `shared`.
 */
export function prepareSocketDir(socketPath: string, shared: boolean): void {
  const dir = path.dirname(socketPath);
  try {
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  } catch (err) {
    throw systemError(err as NodeJS.ErrnoException);
  }
  let st: fs.Stats;
  try {
    st = fs.lstatSync(dir);
  } catch (err) {
    throw systemError(err as NodeJS.ErrnoException);
  }
  if (!st.isDirectory()) unsafe(`${dir} is not a directory (a symbolic link is refused too)`);
  const uid = process.getuid?.();
  if (uid !== undefined && st.uid !== uid) unsafe(`${dir} belongs to uid ${st.uid}, not to this user (${uid}); the socket must live in a folder of its own user`);
  const mode = st.mode & 0o777;
  if (mode & 0o022) unsafe(`${dir} is writable by other users (mode ${mode.toString(8)}); make it 0700 (chmod 700 ${dir})`);
  if (!shared && mode & 0o077)
    unsafe(`${dir} can be entered by other users (mode ${mode.toString(8)}); make it 0700, or allow other users explicitly (--allow-uid)`);
}

/** Whether a daemon answers on `socketPath` now. */
function answers(socketPath: string): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect(socketPath);
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

/**
 * Clears the way for binding `socketPath`: nothing there is fine; a socket nobody answers on (a
 * daemon that died) is removed; a live socket, or any other kind of file, is ERR_PENSTOCK_SERVE_IN_USE.
 */
export async function claimSocketPath(socketPath: string): Promise<void> {
  let st: fs.Stats;
  try {
    st = fs.lstatSync(socketPath);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw systemError(err as NodeJS.ErrnoException);
  }
  if (!st.isSocket()) throw usage('ERR_PENSTOCK_SERVE_IN_USE', `${socketPath} exists and is not a socket; it is left alone (choose another path)`);
  if (await answers(socketPath)) throw usage('ERR_PENSTOCK_SERVE_IN_USE', `A daemon already serves ${socketPath}`);
  try {
    fs.unlinkSync(socketPath);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw systemError(err as NodeJS.ErrnoException);
  }
}
