/** How the CLI opens checkpoints: local paths and URLs, with `--anonymous` for public buckets. */
import { openSource } from '../sources/open-source.js';
import type { SourceOpener } from '../tensors/source.js';

/**
 * The opener for a command's `--anonymous`: s3:// objects opened without credentials or signing
 * (the library's `anonymous` option); without the flag, the library's default opener.
 */
export function sourceOpener(values: Readonly<Record<string, unknown>>): SourceOpener | undefined {
  if (values.anonymous !== true) return undefined;
  return (location) => openSource(location, { anonymous: true });
}
