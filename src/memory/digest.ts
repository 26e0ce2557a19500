/**
 * Digests of memory of any size. Node's `Hash.update` refuses more than 2^31 - 1 bytes in one
 * call (`RangeError: data is too long`), so a 2 GiB buffer or larger has to be fed in pieces.
 */
import crypto from 'node:crypto';

/** Bytes per `update` call: well below the 2^31 - 1 bytes Node takes at once. */
export const DIGEST_PIECE = 1 << 30;

/** What {@link updateInPieces} needs of a hash (a `crypto.Hash`, or anything with `update`). */
export interface Updatable {
  update(data: Uint8Array): unknown;
}

/** Feeds `bytes` to `hash` in pieces of at most `piece` bytes; returns `hash`. */
export function updateInPieces<H extends Updatable>(hash: H, bytes: ArrayBufferView, piece = DIGEST_PIECE): H {
  if (!Number.isSafeInteger(piece) || piece < 1 || piece > DIGEST_PIECE) throw new RangeError(`piece must be an integer from 1 to ${DIGEST_PIECE}, got ${piece}`);
  const view = new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  // An empty input still gets one (empty) update, as a whole-buffer call would.
  if (view.length === 0) hash.update(view);
  for (let off = 0; off < view.length; off += piece) hash.update(view.subarray(off, Math.min(view.length, off + piece)));
  return hash;
}

/** The hex digest of `bytes` with `algorithm` (`sha256`, `md5`, …), fed in pieces. */
export function digestHex(algorithm: string, bytes: ArrayBufferView, piece = DIGEST_PIECE): string {
  return updateInPieces(crypto.createHash(algorithm), bytes, piece).digest('hex');
}
