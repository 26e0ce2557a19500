/**
 * Checking a loaded set against its files: each tensor's sha256 from the memory it landed in
 * (copied back from the GPU) and from the file's bytes, read through plain `fs` calls (not the
 * engine that loaded them), so that the check is independent of the path under test.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import { promisify } from 'node:util';
import { DeviceBuffer } from '../memory/device-buffer.js';
import { updateInPieces } from '../memory/digest.js';
import { formatError } from '../formats/errors.js';
import { isUrl } from '../formats/sharded-index.js';
import { checkOptionKeys } from '../settings/option-keys.js';
import { usage } from '../vocabulary/errors.js';
import { describe } from '../vocabulary/validate.js';
import { openRegularFile } from '../engine/open-regular.js';
import { openAnySource, type SourceOpener } from './source.js';
import type { TensorSet, TensorView } from './tensor-set.js';

/** One tensor's check. */
export interface TensorCheck {
  /** The tensor's name. */
  name: string;
  /** Its safetensors dtype name. */
  dtype: string;
  /** Dimensions in elements as loaded. */
  shape: number[];
  /** Bytes compared (the tensor's byte length in the slab). */
  bytes: number;
  /** sha256 of the bytes in memory. */
  sha256: string;
  /** sha256 of the same bytes in the file. */
  fileSha256: string;
  /** Whether the two digests are equal. */
  match: boolean;
}

/** sha256 (hex) of a tensor's bytes as they are in memory. */
export async function tensorSha256(view: TensorView): Promise<string> {
  const h = crypto.createHash('sha256');
  // A freed pinned slab detaches its memory: its views then have no bytes left to hash.
  if (!(view.data instanceof DeviceBuffer) && view.data.byteLength !== view.byteLength)
    throw formatError('ERR_PENSTOCK_TENSOR_SET_FREED', `the memory of tensor ${JSON.stringify(view.name)} was freed`, { tensor: view.name });
  if (view.data instanceof DeviceBuffer) {
    // Pieces of at most 64 MiB, so that checking a large tensor does not hold its size on the host.
    const piece = 64 << 20;
    const buf = Buffer.allocUnsafeSlow(Math.min(piece, view.byteLength));
    for (let off = 0; off < view.byteLength; off += piece) {
      const n = Math.min(piece, view.byteLength - off);
      await view.data.copyTo(buf, { offset: off, size: n });
      h.update(buf.subarray(0, n));
    }
  } else updateInPieces(h, view.data);
  return h.digest('hex');
}

/** sha256 (hex) of `size` bytes at `offset` of a file (read with `fs`) or of a URL's object (through `openSource`, by default the remote reader). */
export async function fileRangeSha256(location: string, offset: number, size: number, openSource?: SourceOpener): Promise<string> {
  const h = crypto.createHash('sha256');
  const piece = 16 << 20;
  const buf = Buffer.allocUnsafeSlow(Math.min(piece, Math.max(1, size)));
  if (isUrl(location)) {
    const src = await (openSource ?? openAnySource)(location);
    try {
      for (let off = 0; off < size; off += piece) {
        const n = Math.min(piece, size - off);
        const got = await src.read(buf, { fileOffset: offset + off, size: n });
        h.update(buf.subarray(0, got));
      }
    } finally {
      await src.close();
    }
    return h.digest('hex');
  }
  // Through the same check as the engine's open: a FIFO put in the file's place never blocks.
  const fd = await openRegularFile(location, fs.constants.O_RDONLY);
  try {
    for (let off = 0; off < size; ) {
      const bytesRead = await readAt(fd, buf, Math.min(piece, size - off), offset + off);
      if (bytesRead === 0) break;
      h.update(buf.subarray(0, bytesRead));
      off += bytesRead;
    }
  } finally {
    fs.closeSync(fd);
  }
  return h.digest('hex');
}

const readAsync = promisify(fs.read);
const readAt = async (fd: number, buf: Buffer, length: number, position: number) => (await readAsync(fd, buf, 0, length, position)).bytesRead;

/** Checks every tensor of a set against its file; resolves to one check per tensor (mismatches included). */
export async function verifyTensorSet(set: TensorSet, options: { openSource?: SourceOpener } = {}): Promise<TensorCheck[]> {
  checkOptionKeys('verifyTensorSet', options);
  if (options.openSource !== undefined && typeof options.openSource !== 'function')
    throw usage('ERR_PENSTOCK_INVALID_ARGUMENT', `openSource must be a function, got ${describe(options.openSource)}`);
  const out: TensorCheck[] = [];
  for (const t of set.tensors) {
    // Freed before the call, or between two tensors: the same code whatever memory the set held.
    if (set.freed) throw formatError('ERR_PENSTOCK_TENSOR_SET_FREED', 'this tensor set was freed');
    const sha256 = await tensorSha256(t);
    const fileSha256 = await fileRangeSha256(t.path, t.fileOffset, t.byteLength, options.openSource);
    out.push({ name: t.name, dtype: t.dtype, shape: t.shape, bytes: t.byteLength, sha256, fileSha256, match: sha256 === fileSha256 });
  }
  return out;
}

/** Throws `ERR_PENSTOCK_TENSOR_VERIFY_MISMATCH` naming the first tensors that differ. */
export function assertVerified(checks: readonly TensorCheck[]): void {
  const bad = checks.filter((c) => !c.match);
  if (bad.length > 0)
    throw formatError('ERR_PENSTOCK_TENSOR_VERIFY_MISMATCH', `${bad.length} tensor(s) differ from their files: ${bad.slice(0, 5).map((c) => c.name).join(', ')}${bad.length > 5 ? ', …' : ''}`);
}
