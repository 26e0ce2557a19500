/**
 * One way to open what a loader reads from: a local path or a remote URL, behind the one
 * {@link Source} surface; and where a name found beside a source (a shard named by an index)
 * lies, kept inside the folder it was found in.
 */
import path from 'node:path';
import { open, type PenstockFile } from '../engine/file.js';
import { RemoteError } from './remote/errors.js';
import { openRemote, type OpenRemoteOptions, type RemoteObject } from './remote/source.js';
import { isRemoteUrl, parseRemoteUrl, redactText, redactUrl } from './remote/url.js';
import type { Source } from './source.js';

/**
 * Opens `s3://…` and `http(s)://…` with {@link openRemote}, anything else as a file for reading;
 * either is a {@link Source}.
 */
export async function openSource(pathOrUrl: string, remoteOptions: OpenRemoteOptions = {}): Promise<PenstockFile | RemoteObject> {
  return isRemoteUrl(pathOrUrl) ? openRemote(pathOrUrl, remoteOptions) : open(pathOrUrl, 'r');
}

const bad = (why: string) => new RemoteError('ERR_PENSTOCK_REMOTE_INVALID_URL', why);

/**
 * Where `relative` (a shard named by a sharded checkpoint's index, say) lies beside `base`: in the
 * same folder of the same bucket for s3:// (keys taken literally), resolved as a URL for http(s)://
 * (a presigned query string is not carried over: each object needs its own), or as a path. Beside
 * a remote base, the result is always on the base's own origin (scheme, host, port and user info)
 * or bucket, whatever the spelling of `relative`; anything else is ERR_PENSTOCK_REMOTE_INVALID_URL.
 */
export function resolveBeside(base: string, relative: string): string {
  if (!isRemoteUrl(base)) {
    if (isRemoteUrl(relative) || path.isAbsolute(relative)) return relative;
    return path.resolve(path.dirname(base), relative);
  }
  const addr = parseRemoteUrl(base);
  if (addr.kind === 'http') {
    let url: URL;
    try {
      url = new URL(relative, addr.url);
    } catch {
      throw bad(`${JSON.stringify(redactText(relative))} does not resolve to a URL beside ${redactUrl(addr.url)}`);
    }
    const from = addr.url;
    if (url.protocol !== from.protocol || url.host !== from.host || url.username !== from.username || url.password !== from.password)
      throw bad(`${JSON.stringify(redactText(relative))} resolves to ${url.protocol}//${url.host}, not to the origin of ${redactUrl(from)}`);
    url.search = '';
    url.hash = '';
    return url.href;
  }
  if (isRemoteUrl(relative)) {
    const other = parseRemoteUrl(relative);
    if (other.kind !== 's3' || other.bucket !== addr.bucket) throw bad(`${JSON.stringify(redactText(relative))} is not in the bucket ${addr.bucket}`);
    return relative;
  }
  const key = path.posix.normalize(path.posix.join(path.posix.dirname(addr.key), relative));
  if (key.startsWith('../') || key === '..') throw bad(`'${relative}' leads out of the bucket ${addr.bucket}`);
  return `s3://${addr.bucket}/${key.replace(/^\.\//, '')}`;
}

/**
 * {@link resolveBeside}, where the result must also lie inside `base`'s own folder (or below it):
 * the rule for the shards of an index. For http(s):// the name is judged as a server would see it
 * too, percent-decoded (`%2e%2e`, `..%2f`) and with `\` as a separator; a name that would leave the
 * folder in any reading is ERR_PENSTOCK_REMOTE_INVALID_URL.
 */
export function resolveInside(base: string, relative: string): string {
  const out = resolveBeside(base, relative);
  const leaves = () => bad(`${JSON.stringify(redactText(relative))} leads out of the folder of ${isRemoteUrl(base) ? redactText(base) : base}`);
  if (!isRemoteUrl(base)) {
    const rel = path.relative(path.dirname(path.resolve(base)), out);
    if (rel === '' || rel.startsWith('..') || path.isAbsolute(rel)) throw leaves();
    return out;
  }
  const addr = parseRemoteUrl(base);
  if (addr.kind === 's3') {
    const folder = path.posix.dirname(addr.key);
    const key = parseRemoteUrl(out);
    if (key.kind !== 's3' || (folder !== '.' && !key.key.startsWith(`${folder}/`))) throw leaves();
    return out;
  }
  let decoded: string;
  try {
    decoded = decodeURIComponent(relative);
  } catch {
    throw bad(`${JSON.stringify(redactText(relative))} holds a malformed percent-encoding`);
  }
  if (/\\/.test(decoded) || decoded.split('/').some((seg) => seg === '..' || seg === '.')) throw leaves();
  const folder = addr.url.pathname.slice(0, addr.url.pathname.lastIndexOf('/') + 1);
  const pathname = new URL(out).pathname;
  if (!pathname.startsWith(folder) || pathname.length === folder.length) throw leaves();
  return out;
}
