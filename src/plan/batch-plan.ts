/**
 * How a batch of ranges is read: which ranges share one pread, in what order reads are staged,
 * and how reads are grouped into tasks. Pure planning over plain numbers; native code
 * (batch_read.cc) carries the plan out and checks every index and length of it again.
 */

import { sortByKeys } from './key-sort.js';

const KiB = 1024;

/**
 * Ranges of one file into host memory at most this far apart are read by one pread (the bytes
 * between are read and dropped). A pread of a cached page costs about as much as copying 16 KiB, so a smaller
 * gap is cheaper to read through than to skip.
 */
const COALESCE_GAP = 16 * KiB;
/** The least bytes a batch task carries: below this a task's fixed costs outweigh its reads. */
const BATCH_TASK_MIN = 64 * KiB;
/** Tasks per pool thread, so that threads that finish early take more and none idles long. */
const BATCH_TASKS_PER_THREAD = 4;
/**
 * Each worker issues a task's reads through an io_uring ring of this many entries: up to that many
 * reads to one system call. On a 2-core VM, random cached 4 KiB reads cost 2.7–3.0 µs each by
 * pread and 1.2–1.3 µs through a ring of 256 (most of a pread there is entering and leaving the
 * kernel). Where io_uring cannot be had, the addon reads by pread and says why.
 */
export const BATCH_RING_ENTRIES = 256;
/** Bytes of scratch one ring group of host reads may use (reads straight into a target need none). */
export const BATCH_RING_SCRATCH = 1024 * KiB;
/**
 * A fill of a bounce half whose ranges need at least this many copies to the GPU (ranges apart
 * there) issues them in `cuMemcpyBatchAsync` calls (one per {@link COPY_BATCH_MAX} copies)
 * where the driver has them. On an H200
 * (bench/copy-batch-probe.cc, bench/history/results/copy-batch-probe-h200.txt), copies of 4 KiB issued a
 * call each ran at 0.25–0.52 M copies/s from 1, 4 or 16 threads alike (the driver serialises
 * them); in batches, faster from two copies a call on: 2 copies 0.28 / 0.67 / 1.21 M/s from 1 /
 * 4 / 16 threads, 16 copies 0.76 / 1.59 / 1.58, 1024 copies 0.85 / 1.96 / 1.61.
 */
export const COPY_BATCH_MIN = 2;
/**
 * The most copies one batch call carries; a fill that needs more issues several. The driver
 * documents no limit, and 1024 is the largest batch measured ({@link COPY_BATCH_MIN}'s figures);
 * a fill of tiny ranges can hold far more.
 */
export const COPY_BATCH_MAX = 1024;

/** One range, resolved to indices: its file, its target and where in them. */
export interface PlanRange {
  file: number;
  fileOffset: number;
  size: number;
  /** Index into the batch's targets (host targets first, then device ones). */
  target: number;
  targetOffset: number;
  /** GPU ordinal of the target, or -1 for host memory. */
  device: number;
}

/**
 * The ranges of a batch as columns, range `i` at index `i` of each: a batch holds thousands of
 * ranges, and typed columns cost neither an object per range nor the collector's time.
 */
export interface PlanColumns {
  /** Ranges. */
  count: number;
  file: Uint32Array;
  fileOffset: Float64Array;
  size: Float64Array;
  /** Index into the batch's targets (host targets first, then device ones). */
  target: Uint32Array;
  targetOffset: Float64Array;
  /** GPU ordinal of the target, or -1 for host memory. */
  device: Int32Array;
}

/** Empty columns for `count` ranges. */
export function planColumns(count: number): PlanColumns {
  return {
    count,
    file: new Uint32Array(count), fileOffset: new Float64Array(count), size: new Float64Array(count),
    target: new Uint32Array(count), targetOffset: new Float64Array(count), device: new Int32Array(count),
  };
}

/** The columns of a list of ranges. */
export function columnsOf(ranges: readonly PlanRange[]): PlanColumns {
  const c = planColumns(ranges.length);
  ranges.forEach((r, i) => {
    c.file[i] = r.file;
    c.fileOffset[i] = r.fileOffset;
    c.size[i] = r.size;
    c.target[i] = r.target;
    c.targetOffset[i] = r.targetOffset;
    c.device[i] = r.device;
  });
  return c;
}

export interface PlanLimits {
  /** Pool threads. */
  threads: number;
  /** The largest single read into host memory (a longer range is cut into reads of this size). */
  hostReadMax: number;
  /** The largest single read into a device's staging (a bounce half), by ordinal. */
  deviceReadMax: (device: number) => number;
  /** Number of host targets (target indices below it are host memory). */
  hostTargets: number;
  /** Bytes between two ranges of a file that one pread still reads through (default {@link COALESCE_GAP}). */
  coalesceGap?: number;
}

/** The plan, in the record layout batch_bindings.cc reads. */
export interface BatchPlan {
  /** 7 numbers per read: file, fileOffset, length, firstPiece, pieces, directTarget (-1: staged), directOffset. */
  reads: Float64Array;
  /** 4 numbers per piece: offset in its read, size, target, targetOffset. */
  pieces: Float64Array;
  /** 3 numbers per task: firstRead, reads, device (-1: host). */
  tasks: Float64Array;
  /** The range each piece belongs to. */
  pieceRange: Uint32Array;
  /** The pieces of each read: read r has pieces [readPieces[r], readPieces[r + 1]). */
  readPieces: Uint32Array;
  /** Reads, pieces and tasks into host memory and into GPUs. */
  counts: { hostReads: number; deviceReads: number; tasks: number };
}

/**
 * Pieces: ranges cut to their memory's largest read, as columns indexed by piece id, with the
 * ids of host pieces and of device pieces apart.
 */
interface Pieces {
  range: Uint32Array;
  file: Uint32Array;
  offset: Float64Array;
  size: Float64Array;
  target: Uint32Array;
  targetOffset: Float64Array;
  device: Int32Array;
  host: Uint32Array;
  onDevice: Uint32Array;
}

/**
 * Cuts ranges into pieces no longer than their memory's largest read. The per-device limit is
 * asked once per device, not once per range. Where every range is one piece (the usual batch of
 * samples), the pieces are the ranges' own columns.
 */
function cut(c: PlanColumns, l: PlanLimits): Pieces {
  const limits = new Map<number, number>();
  const { count, size, device } = c;
  let lastDevice = -1;
  let lastMax = l.hostReadMax;
  // Ranges mostly share the device of the one before: the map is asked only on a change.
  const maxFor = (d: number) => {
    if (d !== lastDevice) {
      lastDevice = d;
      if (d < 0) lastMax = l.hostReadMax;
      else {
        let m = limits.get(d);
        if (m === undefined) limits.set(d, (m = l.deviceReadMax(d)));
        lastMax = m;
      }
    }
    return lastMax;
  };
  let total = 0;
  let hostCount = 0;
  for (let i = 0; i < count; i++) {
    const d = device[i]!;
    const n = Math.ceil(size[i]! / maxFor(d));
    total += n;
    if (d < 0) hostCount += n;
  }
  const host = new Uint32Array(hostCount);
  const onDevice = new Uint32Array(total - hostCount);
  if (total === count) {
    // No range is empty or cut: piece i is range i.
    const range = new Uint32Array(count);
    let h = 0;
    let g = 0;
    for (let i = 0; i < count; i++) {
      range[i] = i;
      if (device[i]! < 0) host[h++] = i;
      else onDevice[g++] = i;
    }
    return { range, file: c.file, offset: c.fileOffset, size, target: c.target, targetOffset: c.targetOffset, device, host, onDevice };
  }
  const p: Pieces = {
    range: new Uint32Array(total), file: new Uint32Array(total), offset: new Float64Array(total), size: new Float64Array(total),
    target: new Uint32Array(total), targetOffset: new Float64Array(total), device: new Int32Array(total), host, onDevice,
  };
  let k = 0;
  let h = 0;
  let g = 0;
  for (let i = 0; i < count; i++) {
    const d = device[i]!;
    const max = maxFor(d);
    const n = size[i]!;
    for (let at = 0; at < n; at += max) {
      p.range[k] = i;
      p.file[k] = c.file[i]!;
      p.offset[k] = c.fileOffset[i]! + at;
      p.size[k] = Math.min(max, n - at);
      p.target[k] = c.target[i]!;
      p.targetOffset[k] = c.targetOffset[i]! + at;
      p.device[k] = d;
      if (d < 0) host[h++] = k++;
      else onDevice[g++] = k++;
    }
  }
  return p;
}

/** Whether `ids` is already in the order of `keys` (most significant first). */
function inOrder(ids: Uint32Array, keys: readonly ArrayLike<number>[]): boolean {
  for (let i = 1; i < ids.length; i++) {
    const a = ids[i - 1]!;
    const b = ids[i]!;
    for (const key of keys) {
      const x = key[a]!;
      const y = key[b]!;
      if (x < y) break;
      if (x > y) return false;
    }
  }
  return true;
}

function sorted(ids: Uint32Array, keys: readonly ArrayLike<number>[]): Uint32Array {
  return inOrder(ids, keys) ? ids : sortByKeys(ids, keys);
}

/**
 * Reads as columns: read `r` is the pieces `order[from[r], to[r])` of one file, bytes
 * `[offset[r], end[r])`.
 */
interface Reads {
  count: number;
  device: Int32Array;
  file: Uint32Array;
  offset: Float64Array;
  end: Float64Array;
  from: Uint32Array;
  to: Uint32Array;
}

/**
 * A batch goes to the pool in parts, each planned while the pool reads the one before: the
 * planning of the rest of a large batch then runs under the reads instead of before them. The
 * first part holds this many pieces, so the pool starts soon. Ranges are cut and sorted over the
 * whole batch first, so parts split the sorted order and neighbours in a file still share a
 * pread (except across a part's edge). On the H200 machine, 10 000 random 4 KiB ranges into the
 * GPU: 1.1–1.6 M ranges/s as one part, 1.9–2.1 in parts from 2048 pieces, doubling
 * (docs/performance.md).
 */
export const BATCH_PART_PIECES = 2048;
/**
 * Each part after the first holds this many times the pieces of the one before: the first starts
 * the pool soon, and later, larger ones cost fewer submissions, each of which wakes the pool and
 * takes the JS thread's CPU for a moment (on a 2-core machine that costs more than it saves).
 */
const BATCH_PART_GROWTH = 2;

/** Plans a batch as one part. Ranges of size 0 get no piece (they read nothing). */
export function planBatch(ranges: PlanColumns, l: PlanLimits): BatchPlan {
  return planParts(ranges, l, Infinity).next().value as BatchPlan;
}

/**
 * Plans a batch in parts, the first of at most `partPieces` pieces and each later one of up to
 * {@link BATCH_PART_GROWTH} times the one before, in the order they should be read, each planned
 * only when asked for: a caller submits one part and plans the next while it is read.
 * Always yields at least one part (an empty one when no range has a byte to read).
 */
export function* planParts(ranges: PlanColumns, l: PlanLimits, partPieces: number = BATCH_PART_PIECES): Generator<BatchPlan, void, undefined> {
  // Host pieces in file order, so neighbours can share a pread. Device pieces in target order,
  // so staging keeps it and pieces next to each other on the GPU go in one copy (host reads copy
  // nowhere, and file order reads ahead best). Callers often pass ranges in one of these orders
  // already: sorting is skipped then.
  const p = cut(ranges, l);
  const host = sorted(p.host, [p.file, p.offset]);
  const device = sorted(p.onDevice, [p.device, p.target, p.targetOffset, p.offset]);
  const order = new Uint32Array(host.length + device.length);
  order.set(host);
  order.set(device, host.length);
  let step = Math.max(1, Math.floor(partPieces));
  let from = 0;
  do {
    const to = Math.min(order.length, from + step);
    step *= BATCH_PART_GROWTH;
    yield planPart(p, order.subarray(from, to), Math.max(0, Math.min(to, host.length) - from), l);
    from = to;
  } while (from < order.length);
}

/** The reads, pieces and tasks of one part: `order`'s pieces, of which the first `hostCount` go to host memory. */
function planPart(p: Pieces, order: Uint32Array, hostCount: number, l: PlanLimits): BatchPlan {
  const gap = l.coalesceGap ?? COALESCE_GAP;
  const cap = order.length;
  const rd: Reads = {
    count: 0, device: new Int32Array(cap), file: new Uint32Array(cap), offset: new Float64Array(cap), end: new Float64Array(cap),
    from: new Uint32Array(cap), to: new Uint32Array(cap),
  };
  const { file, offset, size } = p;
  const rFile = rd.file;
  const rOffset = rd.offset;
  const rEnd = rd.end;
  const rTo = rd.to;
  let r = -1;
  const open = (i: number, id: number) => {
    r = rd.count++;
    rd.device[r] = p.device[id]!;
    rFile[r] = file[id]!;
    rOffset[r] = offset[id]!;
    rEnd[r] = offset[id]! + size[id]!;
    rd.from[r] = i;
    rTo[r] = i + 1;
  };
  const hostMax = l.hostReadMax;
  for (let i = 0; i < hostCount; i++) {
    const id = order[i]!;
    const end = offset[id]! + size[id]!;
    if (r >= 0 && rFile[r] === file[id] && offset[id]! <= rEnd[r]! + gap && Math.max(rEnd[r]!, end) - rOffset[r]! <= hostMax) {
      if (end > rEnd[r]!) rEnd[r] = end;
      rTo[r] = i + 1;
    } else open(i, id);
  }
  let max = 0;
  for (let i = hostCount; i < order.length; i++) {
    const id = order[i]!;
    const d = p.device[id]!;
    const end = offset[id]! + size[id]!;
    if (i === hostCount || p.device[order[i - 1]!] !== d) max = l.deviceReadMax(d);
    if (i > hostCount && rd.device[r] === d && rFile[r] === file[id] && end - rOffset[r]! <= max && continues(p, order[rTo[r]! - 1]!, rEnd[r]!, id)) {
      rEnd[r] = end;
      rTo[r] = i + 1;
    } else open(i, id);
  }
  return encode(p, order, rd, l);
}

/**
 * Into a GPU, a piece joins a read only where it continues it exactly, in the file and in the
 * same target: staging then keeps target order, so a run of such ranges is one copy. Joining
 * near ranges would save preads but cost a copy per range, and small copies cost the GPU's
 * copy engine more than a pread of a cached page costs a thread.
 */
function continues(p: Pieces, last: number, end: number, id: number): boolean {
  const size = p.size;
  return p.offset[id] === end && p.offset[last]! + size[last]! === end && p.target[id] === p.target[last] && p.targetOffset[id] === p.targetOffset[last]! + size[last]!;
}

/**
 * Where a read lands straight in host memory: its pieces tile one stretch of one target exactly.
 * Returns the offset in the target, or -1.
 */
function directOffset(p: Pieces, order: Uint32Array, rd: Reads, r: number, hostTargets: number): number {
  const first = order[rd.from[r]!]!;
  if (p.target[first]! >= hostTargets || p.offset[first] !== rd.offset[r]) return -1;
  const shift = p.targetOffset[first]! - p.offset[first]!;
  let next = rd.offset[r]!;
  for (let i = rd.from[r]!; i < rd.to[r]!; i++) {
    const id = order[i]!;
    if (p.target[id] !== p.target[first] || p.offset[id] !== next || p.targetOffset[id]! - p.offset[id]! !== shift) return -1;
    next = p.offset[id]! + p.size[id]!;
  }
  return next === rd.end[r] ? rd.offset[r]! + shift : -1;
}

function encode(p: Pieces, order: Uint32Array, rd: Reads, l: PlanLimits): BatchPlan {
  const n = rd.count;
  const r7 = new Float64Array(n * 7);
  const p4 = new Float64Array(order.length * 4);
  const pieceRange = new Uint32Array(order.length);
  const readPieces = new Uint32Array(n + 1);
  const { offset, size, target, targetOffset, range } = p;
  const { from, to } = rd;
  let k = 0;
  let hostReads = 0;
  for (let r = 0; r < n; r++) {
    readPieces[r] = k;
    const host = rd.device[r]! < 0;
    const direct = host ? directOffset(p, order, rd, r, l.hostTargets) : -1;
    if (host) hostReads++;
    const at = r * 7;
    const base = rd.offset[r]!;
    r7[at] = rd.file[r]!;
    r7[at + 1] = base;
    r7[at + 2] = rd.end[r]! - base;
    r7[at + 3] = k;
    r7[at + 4] = to[r]! - from[r]!;
    r7[at + 5] = direct >= 0 ? target[order[from[r]!]!]! : -1;
    r7[at + 6] = direct >= 0 ? direct : 0;
    for (let i = from[r]!; i < to[r]!; i++) {
      const id = order[i]!;
      const q = k * 4;
      p4[q] = offset[id]! - base;
      p4[q + 1] = size[id]!;
      p4[q + 2] = target[id]!;
      p4[q + 3] = targetOffset[id]!;
      pieceRange[k++] = range[id]!;
    }
  }
  readPieces[n] = k;
  const tasks = taskSplit(rd, l.threads);
  return { reads: r7, pieces: p4, tasks, pieceRange, readPieces, counts: { hostReads, deviceReads: n - hostReads, tasks: tasks.length / 3 } };
}

/**
 * Reads of each memory (host, each GPU) are dealt into tasks of about equal bytes, in order:
 * enough tasks for every thread several times over, each of at least {@link BATCH_TASK_MIN}.
 */
function taskSplit(rd: Reads, threads: number): Float64Array {
  const out: number[] = [];
  for (let start = 0; start < rd.count; ) {
    const device = rd.device[start]!;
    let stop = start;
    let bytes = 0;
    while (stop < rd.count && rd.device[stop] === device) bytes += rd.end[stop]! - rd.offset[stop++]!;
    const n = Math.max(1, Math.min(stop - start, threads * BATCH_TASKS_PER_THREAD, Math.floor(bytes / BATCH_TASK_MIN)));
    const share = bytes / n;
    let made = 0;
    let acc = 0;
    let first = start;
    for (let r = start; r < stop; r++) {
      acc += rd.end[r]! - rd.offset[r]!;
      if (r + 1 === stop || acc >= share * (made + 1)) {
        out.push(first, r + 1 - first, device);
        first = r + 1;
        made++;
      }
    }
    start = stop;
  }
  return Float64Array.from(out);
}
