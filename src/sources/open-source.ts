/**
 * One way to open what a loader reads from: a local path or a remote URL, behind the read
 * surface both share (that of `PenstockFile`).
 */
import path from 'node:path';
import { open, type Memory, type ReadOptions } from '../engine/file.js';
import { RemoteError } from './remote/errors.js';
import { openRemote, type OpenRemoteOptions } from './remote/source.js';
import { isRemoteUrl, parseRemoteUrl } from './remote/url.js';

/** What files and remote objects both offer to a reader. */
export interface ReadSource {
  /** The path, or the redacted address. */
  readonly path: string;
  /** Resolves to the size in bytes. */
  size(): Promise<number>;
  /** Resolves to the bytes read (fewer than asked only at the end). */
  read(target: Memory, options?: ReadOptions): Promise<number>;
  /** Closes the file or the object's connections; idempotent. */
  close(): Promise<void>;
}

/** Opens `s3://…` and `http(s)://…` with {@link openRemote}, anything else as a file for reading. */
export async function openSource(pathOrUrl: string, remoteOptions: OpenRemoteOptions = {}): Promise<ReadSource> {
  return isRemoteUrl(pathOrUrl) ? openRemote(pathOrUrl, remoteOptions) : open(pathOrUrl, 'r');
}

/**
 * Where `relative` (a shard named by a sharded checkpoint's index, say) lies beside `base`: in the
 * same folder of the same bucket for s3:// (keys taken literally), resolved as a URL for http(s)://
 * (a presigned query string is not carried over: each object needs its own), or as a path.
 */
export function resolveBeside(base: string, relative: string): string {
  if (isRemoteUrl(relative) || (!isRemoteUrl(base) && path.isAbsolute(relative))) return relative;
  if (!isRemoteUrl(base)) return path.resolve(path.dirname(base), relative);
  const addr = parseRemoteUrl(base);
  if (addr.kind === 'http') return new URL(relative, addr.url).href.replace(/\?.*$/s, '');
  const key = path.posix.normalize(path.posix.join(path.posix.dirname(addr.key), relative));
  if (key.startsWith('../') || key === '..') throw new RemoteError('ERR_PENSTOCK_REMOTE_INVALID_URL', `'${relative}' leads out of the bucket ${addr.bucket}`);
  return `s3://${addr.bucket}/${key.replace(/^\.\//, '')}`;
}
