/**
 * The route of one read, by its shape: where in the file it starts and how much it reads. A file
 * that goes direct can still have reads that do not: small ones (under penstock's gdsThreshold,
 * or a file system's posix_gds_min_kb), and unaligned ones, whose unaligned parts cuFile moves
 * through its per-buffer bounce cache in GPU memory.
 */
import { formatSize } from '../settings/config.js';
import type { PathFacts } from './paths.js';
import type { Finding, PlatformState, Prediction, ShapePrediction } from './types.js';

/** cuFile's direct path works in whole 4 KiB pages of the file. */
export const GDS_ALIGNMENT = 4096;

/** One read: where it starts in the file, how much, and where it lands in the GPU buffer. */
export interface ReadShape {
  offset: number;
  /** Bytes to read; undefined means to the end of the file. */
  size?: number;
  /** Where in the target GPU buffer the data lands (its base is page aligned). */
  targetOffset?: number;
}

const FS_SECTIONS: Record<string, string> = { lustre: 'lustre', beegfs: 'beegfs', gpfs: 'gpfs', wekafs: 'weka', nfs: 'nfs', nfs4: 'nfs' };

/** The route of one read of a file, from the file's prediction and the read's offsets and size. */
export function predictShape(p: PlatformState, f: PathFacts, file: Prediction, shape: ReadShape): ShapePrediction {
  const reasons: Finding[] = [];
  const notes: Finding[] = [];
  const offset = shape.offset;
  let size = shape.size ?? (f.size !== undefined ? Math.max(0, f.size - offset) : 0);
  if (f.size !== undefined && offset + size > f.size) {
    const clipped = Math.max(0, f.size - offset);
    notes.push({ code: 'SHAPE_PAST_END', check: 'path.shape', message: `the read ends past the end of the file (${f.size} bytes): ${clipped} bytes would be read` });
    size = clipped;
  }
  const base = { offset, size, ...(shape.targetOffset ? { targetOffset: shape.targetOffset } : {}), fileRoute: file.route };
  if (file.route === 'posix-host') return { ...base, route: 'posix-host', reasons: file.blockers.slice(0, 1), notes };
  if (size < p.gdsThreshold) {
    reasons.push({ code: 'UNDER_GDS_THRESHOLD', check: 'path.shape', message: `${size} bytes is under penstock's gdsThreshold (${p.gdsThreshold}): penstock stages such reads itself without asking cuFile (set PENSTOCK_GDS_THRESHOLD lower to change it)` });
    return { ...base, route: 'posix-device', reasons, notes };
  }
  if (file.route !== 'gds') return { ...base, route: file.route, reasons: file.blockers, notes };
  const section = f.mount ? FS_SECTIONS[f.mount.fsType] : undefined;
  const minKb = section ? p.cufileConfig.posixGdsMinKb[section] : undefined;
  if (minKb && size < minKb * 1024) {
    reasons.push({ code: 'POSIX_GDS_MIN', check: 'platform.cufile.settings', message: `${size} bytes is under fs.${section}.posix_gds_min_kb (${minKb} KiB): cuFile reads it through POSIX` });
    return { ...base, route: 'cufile-compat', reasons, notes };
  }
  const bar1 = p.gpus.find((g) => g.ordinal === 0)?.bar1Bytes;
  if (bar1 !== undefined && size > bar1)
    notes.push({ code: 'SHAPE_OVER_BAR1', check: 'platform.gpu.bar1', message: `the read (${formatSize(size)}) is larger than GPU 0's BAR1 (${formatSize(bar1)}): cuFile cannot map all of the target at once and stages what does not fit` });
  const unalignedOffset = offset % GDS_ALIGNMENT !== 0;
  const unalignedSize = size % GDS_ALIGNMENT !== 0 && (f.size === undefined || offset + size < f.size);
  const targetOffset = shape.targetOffset ?? 0;
  const unalignedTarget = targetOffset % GDS_ALIGNMENT !== 0;
  if (unalignedOffset || unalignedSize || unalignedTarget) {
    const what = [unalignedOffset ? `offset ${offset}` : '', unalignedSize ? `size ${size}` : '', unalignedTarget ? `target offset ${targetOffset}` : ''].filter(Boolean).join(' and ');
    const cache = p.cufileConfig.perBufferCacheKb;
    reasons.push({
      code: 'UNALIGNED_IO',
      check: 'path.shape',
      message: `${what} not a multiple of 4 KiB: cuFile moves the unaligned ${unalignedOffset || unalignedTarget ? 'pieces (every task of the read, as each starts unaligned)' : 'tail'} through its bounce cache in GPU memory (per_buffer_cache_size_kb${cache !== undefined ? ` = ${cache}` : ''}); align offsets and sizes to 4 KiB for pure DMA`,
    });
    return { ...base, route: 'gds-bounce', reasons, notes };
  }
  return { ...base, route: 'gds', reasons, notes };
}

const SHAPE_WORDS: Record<ShapePrediction['route'], string> = {
  gds: 'direct DMA into GPU memory',
  'gds-bounce': "cuFile, partly through its GPU bounce cache (unaligned)",
  'cufile-compat': 'cuFile through host memory (POSIX)',
  'posix-device': "penstock's staged path",
  'posix-host': 'no GPU: host reads only',
};

/** One line for the text report. */
export function shapeLine(s: ShapePrediction): string {
  const head = `${s.size} bytes at ${s.offset}: ${s.route} (${SHAPE_WORDS[s.route]})`;
  return s.reasons[0] ? `${head}: ${s.reasons[0].message}` : head;
}
