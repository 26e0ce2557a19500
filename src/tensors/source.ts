/**
 * Where tensor bytes come from: any {@link Source} (a penstock file as it is, a remote object, or
 * a caller's own), opened by a {@link SourceOpener}.
 */
import { open } from '../engine/file.js';
import { openSource } from '../sources/open-source.js';
import type { Source, SourceOpener } from '../sources/source.js';

export { readBytes, type SourceOpener } from '../sources/source.js';

/** Opens local files only: `open(path, 'r')`. */
export const openFileSource: SourceOpener = (path) => open(path, 'r');

/**
 * The default opener: a local path through penstock's engine, an `s3://`, `http://` or `https://`
 * URL as a remote object (credentials and endpoint from the environment and shared files).
 */
export const openAnySource: SourceOpener = (location) => openSource(location);
