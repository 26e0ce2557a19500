/**
 * One way to open what a loader reads from: a local path or a remote URL, behind the read
 * surface both share (that of `PenstockFile`).
 */
import { open, type Memory, type ReadOptions } from '../file.js';
import { openRemote, type OpenRemoteOptions } from './source.js';
import { isRemoteUrl } from './url.js';

/** What files and remote objects both offer to a reader. */
export interface ReadSource {
  /** The path, or the redacted address. */
  readonly path: string;
  size(): Promise<number>;
  /** Resolves to the bytes read (fewer than asked only at the end). */
  read(target: Memory, options?: ReadOptions): Promise<number>;
  close(): Promise<void>;
}

/** Opens `s3://…` and `http(s)://…` with {@link openRemote}, anything else as a file for reading. */
export async function openSource(pathOrUrl: string, remoteOptions: OpenRemoteOptions = {}): Promise<ReadSource> {
  return isRemoteUrl(pathOrUrl) ? openRemote(pathOrUrl, remoteOptions) : open(pathOrUrl, 'r');
}
