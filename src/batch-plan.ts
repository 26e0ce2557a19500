/**
 * How a batch of ranges is read: which ranges share one pread, in what order reads are staged,
 * and how reads are grouped into tasks. Pure planning over plain numbers; native code
 * (batch_op.cc) carries the plan out and checks every index and length of it again.
 */

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

/** The plan, in the record layout batch_op.cc reads. */
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

interface Piece {
  range: number;
  file: number;
  offset: number;
  size: number;
  target: number;
  targetOffset: number;
  device: number;
}

/**
 * Cuts ranges into pieces no longer than their memory's largest read, host pieces and device
 * pieces apart. A batch holds thousands of ranges: the per-device limit is asked once per
 * device, not once per range.
 */
function cut(ranges: readonly PlanRange[], l: PlanLimits): { host: Piece[]; device: Piece[] } {
  const host: Piece[] = [];
  const device: Piece[] = [];
  const limits = new Map<number, number>();
  for (let i = 0; i < ranges.length; i++) {
    const r = ranges[i]!;
    let max = l.hostReadMax;
    if (r.device >= 0) {
      let m = limits.get(r.device);
      if (m === undefined) limits.set(r.device, (m = l.deviceReadMax(r.device)));
      max = m;
    }
    const out = r.device < 0 ? host : device;
    for (let at = 0; at < r.size; at += max) {
      out.push({ range: i, file: r.file, offset: r.fileOffset + at, size: Math.min(max, r.size - at), target: r.target, targetOffset: r.targetOffset + at, device: r.device });
    }
  }
  return { host, device };
}

/** One pread: the pieces `list[from, to)`, which lie next to each other in their sorted list. */
interface Read {
  device: number;
  file: number;
  offset: number;
  end: number;
  list: Piece[];
  from: number;
  to: number;
}

/** Plans a batch. Ranges of size 0 get no piece (they read nothing). */
export function planBatch(ranges: readonly PlanRange[], l: PlanLimits): BatchPlan {
  const gap = l.coalesceGap ?? COALESCE_GAP;
  // Host pieces in file order, so neighbours can share a pread. Device pieces in target order,
  // so staging keeps it and pieces next to each other on the GPU go in one copy (host reads copy
  // nowhere, and file order reads ahead best). Callers often pass ranges in one of these orders
  // already: sorting is skipped then.
  const { host, device } = cut(ranges, l);
  sortIfNeeded(host, (a, b) => a.file - b.file || a.offset - b.offset);
  sortIfNeeded(device, (a, b) => a.device - b.device || a.target - b.target || a.targetOffset - b.targetOffset || a.offset - b.offset);
  const reads: Read[] = [];
  let cur: Read | undefined;
  for (let i = 0; i < host.length; i++) {
    const p = host[i]!;
    const end = Math.max(cur?.end ?? 0, p.offset + p.size);
    if (cur && cur.file === p.file && p.offset <= cur.end + gap && end - cur.offset <= l.hostReadMax) {
      cur.end = end;
      cur.to = i + 1;
    } else reads.push((cur = { device: -1, file: p.file, offset: p.offset, end: p.offset + p.size, list: host, from: i, to: i + 1 }));
  }
  cur = undefined;
  let max = 0;
  for (let i = 0; i < device.length; i++) {
    const p = device[i]!;
    if (i === 0 || device[i - 1]!.device !== p.device) max = l.deviceReadMax(p.device);
    if (cur && cur.device === p.device && cur.file === p.file && p.offset + p.size - cur.offset <= max && continues(cur, p)) {
      cur.end = p.offset + p.size;
      cur.to = i + 1;
    } else reads.push((cur = { device: p.device, file: p.file, offset: p.offset, end: p.offset + p.size, list: device, from: i, to: i + 1 }));
  }
  return encode(reads, host.length + device.length, l);
}

function sortIfNeeded<T>(a: T[], order: (x: T, y: T) => number): void {
  for (let i = 1; i < a.length; i++)
    if (order(a[i - 1]!, a[i]!) > 0) {
      a.sort(order);
      return;
    }
}

/**
 * Into a GPU, a piece joins a read only where it continues it exactly, in the file and in the
 * same target: staging then keeps target order, so a run of such ranges is one copy. Joining
 * near ranges would save preads but cost a copy per range, and small copies cost the GPU's
 * copy engine more than a pread of a cached page costs a thread.
 */
function continues(read: Read, p: Piece): boolean {
  const last = read.list[read.to - 1]!;
  return p.offset === read.end && last.offset + last.size === read.end && p.target === last.target && p.targetOffset === last.targetOffset + last.size;
}

/** Where a read lands straight in host memory: its pieces tile one stretch of one target exactly. */
function directPlace(read: Read, hostTargets: number): { target: number; offset: number } | undefined {
  const first = read.list[read.from]!;
  if (first.target >= hostTargets || first.offset !== read.offset) return undefined;
  const shift = first.targetOffset - first.offset;
  let next = read.offset;
  for (let i = read.from; i < read.to; i++) {
    const p = read.list[i]!;
    if (p.target !== first.target || p.offset !== next || p.targetOffset - p.offset !== shift) return undefined;
    next = p.offset + p.size;
  }
  return next === read.end ? { target: first.target, offset: read.offset + shift } : undefined;
}

function encode(reads: Read[], pieceCount: number, l: PlanLimits): BatchPlan {
  const r7 = new Float64Array(reads.length * 7);
  const p4 = new Float64Array(pieceCount * 4);
  const pieceRange = new Uint32Array(pieceCount);
  const readPieces = new Uint32Array(reads.length + 1);
  let k = 0;
  let hostReads = 0;
  for (let r = 0; r < reads.length; r++) {
    const rd = reads[r]!;
    readPieces[r] = k;
    const direct = rd.device < 0 ? directPlace(rd, l.hostTargets) : undefined;
    if (rd.device < 0) hostReads++;
    const at = r * 7;
    r7[at] = rd.file;
    r7[at + 1] = rd.offset;
    r7[at + 2] = rd.end - rd.offset;
    r7[at + 3] = k;
    r7[at + 4] = rd.to - rd.from;
    r7[at + 5] = direct ? direct.target : -1;
    r7[at + 6] = direct ? direct.offset : 0;
    for (let i = rd.from; i < rd.to; i++) {
      const p = rd.list[i]!;
      p4[k * 4] = p.offset - rd.offset;
      p4[k * 4 + 1] = p.size;
      p4[k * 4 + 2] = p.target;
      p4[k * 4 + 3] = p.targetOffset;
      pieceRange[k++] = p.range;
    }
  }
  readPieces[reads.length] = k;
  const tasks = taskSplit(reads, l.threads);
  return { reads: r7, pieces: p4, tasks, pieceRange, readPieces, counts: { hostReads, deviceReads: reads.length - hostReads, tasks: tasks.length / 3 } };
}

/**
 * Reads of each memory (host, each GPU) are dealt into tasks of about equal bytes, in order:
 * enough tasks for every thread several times over, each of at least {@link BATCH_TASK_MIN}.
 */
function taskSplit(reads: Read[], threads: number): Float64Array {
  const out: number[] = [];
  for (let start = 0; start < reads.length; ) {
    const device = reads[start]!.device;
    let stop = start;
    let bytes = 0;
    while (stop < reads.length && reads[stop]!.device === device) bytes += reads[stop]!.end - reads[stop++]!.offset;
    const n = Math.max(1, Math.min(stop - start, threads * BATCH_TASKS_PER_THREAD, Math.floor(bytes / BATCH_TASK_MIN)));
    const share = bytes / n;
    let made = 0;
    let acc = 0;
    let first = start;
    for (let r = start; r < stop; r++) {
      acc += reads[r]!.end - reads[r]!.offset;
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
