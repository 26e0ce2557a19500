/**
 * How one transfer is carried, decided from the settings and the state of the file: through
 * O_DIRECT or the page cache, how many tasks of a write run at once, and whether a warm read
 * into the GPU also takes the mapped route. Native code carries out what is decided here.
 */
import type { StorageFacts } from '../system/block-device.js';
import type { Settings } from '../settings/config.js';

const KiB = 1024;
const MiB = 1024 * KiB;

/** Reads at least this large are checked for page-cache residency under directIoRead 'auto'. */
const AUTO_DIRECT_MIN = 64 * MiB;
/** Under mappedReads 'auto', only reads at least this large take the mapped route as well. */
const AUTO_MAPPED_MIN = 64 * MiB;
/**
 * Under mappedReads 'auto', only pools this small use it. Registering pages stalls the other
 * threads' CUDA calls, so beside many staging threads it costs more than it carries; with one
 * or two threads it carries far more per thread than staging does (docs/performance.md).
 */
const AUTO_MAPPED_MAX_THREADS = 2;
/** Buffered writes under writeThreads 'auto': tasks of one write in flight at once. */
const AUTO_WRITE_THREADS = 4;
/**
 * Host writes through scratch: bytes per piece, small enough to stay in a core's cache (256 KiB
 * and 1 MiB measured alike). Staged writes use their own pieces (a quarter of a task).
 */
const WRITE_SCRATCH_PIECE = 1 * MiB;
/**
 * Pages registered per mapped piece (registration cost is per page, its fixed cost per call). One
 * worker registers them: registration serialises in the CUDA driver, so a second would only wait.
 */
export const MAPPED_PIECE = 64 * MiB;
/**
 * A mapped claim takes at most 1/this of the tasks left (and at most a piece), so the mapped
 * runner's last piece does not keep the read waiting after the staged runners have run dry.
 */
export const MAPPED_CLAIM_DIVISOR = 4;

/**
 * The smallest task an operation is cut into so that more threads take part. A read of 16 MiB
 * in 4 MiB tasks keeps only 4 of 16 threads busy; cut to 1 MiB it keeps all 16. Below this size
 * the fixed cost of a task (a queue turn, a wake-up, a copy issued) outweighs the parallelism
 * (bench section `split` measures it).
 */
export const TASK_FLOOR = 256 * KiB;
/** Task boundaries stay on page multiples: O_DIRECT spans and mapped pieces need them. */
const TASK_ALIGN = 4096;
const alignUp = (n: number) => Math.ceil(n / TASK_ALIGN) * TASK_ALIGN;

/**
 * Bytes per task for an operation of `size` bytes run by `runners` tasks at once: `taskSize` for
 * large operations, and smaller for mid-size ones, so that there are at least as many tasks as
 * runners, but never below {@link TASK_FLOOR}.
 */
export function taskSizeFor(s: Readonly<Settings>, size: number, runners: number = s.threads): number {
  const perRunner = Math.ceil(size / Math.max(1, runners));
  const t = Math.min(s.taskSize, Math.max(TASK_FLOOR, perRunner));
  return alignUp(t);
}

/**
 * Large staged reads into the GPU aim for this many tasks per thread: the last round of copies
 * (a task's copy each, all landing at once on the copy engine) is then a small part of the read.
 * A 256 MiB read in 4 MiB tasks ends on 64 MiB of copies (1.2 ms of a 6 ms read); in 2 MiB
 * tasks on half that (bench section `split` on the H200: 43.0 → 44.2 and 43.6 → 44.6 GB/s in
 * two runs; the section's own 256 MiB row 41.5 with 4 MiB tasks, 43.2 with 2 MiB in another).
 */
export const DEVICE_TASKS_PER_THREAD = 8;
/**
 * That aim cuts tasks no smaller than this: below it each task's copy costs more than the
 * shorter tail saves (bench section `split`: 16 MiB in 1 MiB tasks 22.7 GB/s, in 256 KiB 17.3).
 */
export const DEVICE_TASK_FLOOR = 1 * MiB;

/**
 * Bytes per task of a staged read of `size` bytes into the GPU: the general split
 * ({@link taskSizeFor}: one task a thread above its floor), cut further for large reads to about
 * {@link DEVICE_TASKS_PER_THREAD} a thread but not below {@link DEVICE_TASK_FLOOR}. A 1 MiB read
 * so stays four tasks of 256 KiB (6.0 GB/s on the H200, against 2.3 as one task of 1 MiB).
 */
export function deviceReadTaskSize(s: Readonly<Settings>, size: number): number {
  const share = Math.ceil(size / (Math.max(1, s.threads) * DEVICE_TASKS_PER_THREAD));
  const t = Math.min(taskSizeFor(s, size), Math.max(DEVICE_TASK_FLOOR, share));
  return alignUp(t);
}

/**
 * Whether a host read of `size` bytes is first tried on the calling thread (inline-read.ts): up
 * to the `inlineReadMax` setting, where that costs less than the pool's hand-offs.
 */
export function readsInline(s: Readonly<Settings>, size: number): boolean {
  return size > 0 && size <= s.inlineReadMax && s.directIoRead !== true;
}

/**
 * A device read on the calling thread goes through the GPU's inline staging in pieces of this
 * size when it reads alone: each piece's copy to the GPU runs while the next piece is read, and
 * only the last one is waited for after the reading (a 1 MiB read waited about 60 µs for its one
 * copy on the H200).
 */
export const INLINE_DEVICE_PIECE = 256 * KiB;
/**
 * With helpers, pieces of this size, each read into the reader's cache-sized scratch and
 * streamed into the staging with non-temporal stores. Read straight into the staging, a piece
 * leaves its cache lines dirty and the GPU's copy of it crawls; more helpers then gain nothing.
 * `bench:timeline --only inline` on the H200, 1 MiB, µs: alone in 256 KiB pieces 106–116; 64 KiB
 * pieces with 1, 3, 7, 15 helpers 97–99, 94–98, 98–102, 130–144; through scratch 83, 66–70,
 * 74–75, 107–112 (results/timeline-h200-13-inline.txt).
 */
export const INLINE_HELPED_PIECE = 64 * KiB;
/**
 * The most helpers one read asks for: three was the fastest measured (the same runs: 69.7 µs
 * against 115.7 alone; seven 75.0, fifteen 111.7). Processes that made such reads once crashed
 * at exit now and then on the H200, while the scratch was thread-local memory; with the scratch
 * a slot per reader owned by the staging, 160 children exited cleanly there
 * (`bench/inline-exit-check.ts`: 40 each with three helpers, none, and the public read with the
 * plan asking for none and for three).
 */
export const INLINE_MAX_HELPERS = 3;

/**
 * How a device read of `size` bytes on the calling thread is cut: bytes per piece, how many
 * pool workers are asked to help read the pieces while this thread reads and copies, and
 * whether each piece goes through scratch. Helpers are asked only where some watch the queue
 * (`spinners`, poolSpinners), up to `maxHelpers`, and where there are at least two pieces for
 * each reader (256 KiB: 31.6 µs with one helper against 37 alone; alone, scratch only costs:
 * 46 against 37).
 */
export function inlineDeviceSplit(size: number, spinners: number, maxHelpers: number = INLINE_MAX_HELPERS): { piece: number; helpers: number; scratch: boolean } {
  const helpers = Math.min(spinners, maxHelpers, Math.floor(size / INLINE_HELPED_PIECE / 2) - 1);
  if (helpers < 1) return { piece: INLINE_DEVICE_PIECE, helpers: 0, scratch: false };
  return { piece: INLINE_HELPED_PIECE, helpers, scratch: true };
}

/**
 * Whether a device read of `size` bytes is first tried on the calling thread: preads from the
 * page cache into the GPU's inline staging and their copies, waited for there. Only while none of
 * this thread's operations is in flight: behind the pool's copies the wait could hold the event
 * loop for as long as they take.
 */
export function readsInlineToDevice(s: Readonly<Settings>, size: number, inflight: () => number): boolean {
  return size > 0 && size <= s.inlineReadMax && s.directIoRead !== true && inflight() === 0;
}

/**
 * Host reads at least this large go through cache-sized scratch and streaming stores
 * (hostStaging): they would push everything else out of the cache, and the scratch keeps them
 * from it. Smaller ones read straight into the target, which is faster while it fits the cache
 * (bench section `split`: 16 MiB read straight at 66 GB/s, through scratch at 39).
 */
export const HOST_STAGE_MIN = 64 * MiB;
/** Bytes per piece of that scratch: a core's share of its cache. */
export const HOST_STAGE_PIECE = 256 * KiB;
/** Reads and writes through O_DIRECT move through aligned scratch in pieces of this size. */
export const DIRECT_PIECE = 4 * MiB;

/**
 * Staged reads into the GPU up to this size also go through cache-sized scratch, streamed into
 * the bounce half with non-temporal stores: the GPU's copy then reads the bytes from memory, not
 * from cache lines the pread left dirty, which it reads far slower. `npm run bench:timeline` on
 * the H200, sixteen tasks: 4 MiB 14.1 → 18.2 GB/s, 16 MiB 23.8 → 30.4, 64 MiB (64 tasks)
 * 35.3 → 39.7; at 256 MiB the extra copy costs more than it saves (45.4 → 43.7).
 */
export const DEVICE_SCRATCH_MAX = 64 * MiB;

/** Staged reads of `size` bytes into the GPU: bytes per scratch piece, or 0 to pread into the bounce half. */
export function deviceStageScratch(size: number, direct: boolean, write: boolean): number {
  return !write && !direct && size <= DEVICE_SCRATCH_MAX ? HOST_STAGE_PIECE : 0;
}

/**
 * Gathered reads (gather_read.cc): staged buffered reads into the GPU of at least
 * {@link GATHER_MIN} and at most this many bytes fill one pinned stage of this size per GPU.
 * Through the bounce halves, every task of a mid-size read finishes its pread at about the same
 * moment and the copies then land on the copy engine together, after the reading; gathered, the
 * finished prefix goes to the GPU in order on one stream while the rest is read.
 * `bench:timeline --only gather-ab` on the H200, the two ways interleaved read by read: 4 MiB
 * 16.95 → 18.45 GB/s, 16 MiB 29.0 → 31.3, 64 MiB 34.7 → 40.2.
 */
export const GATHER_STAGE = DEVICE_SCRATCH_MAX;
/** Smaller reads gain nothing from it: they are one or a few tasks either way. */
export const GATHER_MIN = 1 * MiB;
/**
 * Bytes per task of a gathered read: small, so the prefix grows steadily from the first tasks
 * on (tasks are claimed in order) and the first copy starts early (512 KiB measured alike,
 * 128 KiB slower).
 */
export const GATHER_TASK = 256 * KiB;
/** A gathered read's copies carry at least this many bytes (the last one excepted; 2 MiB measured alike). */
export const GATHER_COPY = 1 * MiB;

/** Whether a read of `size` bytes into the GPU is gathered, and how: its task size and copy size. */
export function planGather(size: number, direct: boolean, write: boolean): { taskSize: number; gatherCopy: number } | undefined {
  // Only reads through scratch (never writes or O_DIRECT) can stream into the stage.
  if (size < GATHER_MIN || size > GATHER_STAGE || deviceStageScratch(size, direct, write) === 0) return undefined;
  return { taskSize: GATHER_TASK, gatherCopy: GATHER_COPY };
}

/**
 * The split of a staged read of `size` bytes into the GPU: gathered where {@link planGather}
 * says so (never beside a mapped share), else {@link deviceReadTaskSize} through the bounce
 * halves (`gatherCopy` 0).
 */
export function planDeviceRead(s: Readonly<Settings>, size: number, direct: boolean, mapped: boolean): { taskSize: number; gatherCopy: number } {
  return (mapped ? undefined : planGather(size, direct, false)) ?? { taskSize: deviceReadTaskSize(s, size), gatherCopy: 0 };
}

/** Host reads of `size` bytes: bytes per piece through scratch, or 0 to read straight into the target. */
export function hostStagePiece(s: Readonly<Settings>, size: number): number {
  return s.hostStaging && size >= HOST_STAGE_MIN ? HOST_STAGE_PIECE : 0;
}

/**
 * Staged writes copy a task off the GPU in about this many pieces, so the copy of one piece
 * overlaps the pwrite of the one before even when the whole write is a single task.
 */
const STAGE_PIECES_PER_TASK = 4;
/** Pieces no smaller than this: below it the cost of issuing a copy outweighs the overlap. */
export const STAGE_PIECE_MIN = 64 * KiB;

/**
 * Bytes per copy of a staged transfer whose tasks are `taskSize` bytes, through bounce halves of
 * `half` bytes. Reads copy whole halves: cut into quarters, 1 GiB → GPU fell from 48.5 to 42.0
 * GB/s and 16 MiB from 19.5 to 14.8 in one run (`npm run bench:knobs`, H200), as sixteen threads
 * issuing four times the copies wait on each other in the driver. A read's overlap comes from
 * the two halves instead: one task's copy runs under the next task's pread. O_DIRECT writes keep
 * whole halves too: the disk wants large requests more than the overlap.
 */
export function stagePiece(taskSize: number, half: number, direct: boolean, write: boolean): number {
  const halfPages = Math.max(TASK_ALIGN, Math.floor(half / TASK_ALIGN) * TASK_ALIGN);
  if (!write || direct) return halfPages;
  const quarter = alignUp(taskSize / STAGE_PIECES_PER_TASK);
  return Math.min(halfPages, Math.max(STAGE_PIECE_MIN, quarter));
}

/**
 * An idle pool thread watches the queue this long before it sleeps: waking a sleeping thread
 * (in a VM, an interrupt to a halted virtual CPU) costs more than a small read itself.
 */
export const POOL_SPIN_NS = 50_000;

/**
 * Pool threads that may watch the queue at once: a quarter of the cores, at most four, at least
 * one. On a small machine every idle thread spinning would take the cores that the JS thread and
 * the busy threads need.
 */
export function poolSpinners(threads: number, cores: number): number {
  return Math.min(threads, Math.max(1, Math.min(4, Math.floor(cores / 4))));
}

/**
 * The facts about a file a read's plan may depend on, each gathered only when a decision asks for
 * it (sampling residency costs a system call per 64 pages sampled).
 */
export interface ReadFacts {
  /** The share of the range's pages in the page cache, 0 to 1 (negative: unknown). */
  residency(): number;
  /** The file's size, or undefined when it cannot be known. */
  fileSize(): number | undefined;
  /** The block device under the file, or undefined (no block device, or not shown by sysfs). */
  storage(): StorageFacts | undefined;
}

/**
 * Whether reads of uncached data from `storage` go O_DIRECT under 'auto': on NVMe drives, where
 * deep queues of direct reads keep the drive busy and leave the page cache to other data; not
 * elsewhere (virtio and SATA disks, network and RAM file systems), where the page cache's
 * readahead does as well or better. On the virtio disks of the GPU machines (docs/performance.md):
 * penstock's O_DIRECT cold load 1.30–1.40 GB/s against buffered `dd` 1.3–1.4 and O_DIRECT `dd`
 * 0.9–1.0 in one lease; its buffered cold load 1.43–1.52 GB/s against O_DIRECT `dd` 1.54 and
 * buffered `dd` 1.32 in another.
 */
export function coldReadsDirect(storage: StorageFacts | undefined): boolean {
  return storage !== undefined && storage.nvme && storage.rotational !== true;
}

/**
 * Bytes per task of a read of mostly uncached data through the page cache: one contiguous stripe
 * per worker, read front to back in whole bounce halves, so the kernel's readahead follows as
 * many sequential streams as there are workers. On the H100 machine's virtio disk (7 GB, caches
 * dropped, one run each, 2026-12-08): 16 stripes read in 8 MiB requests 2.25 GB/s against 2.03
 * for 4 MiB pieces claimed in turn and 1.48 for buffered `dd`; penstock's cold load moved from
 * 1.49–1.53 GB/s (4 MiB tasks) to 2.03 with 55 MiB tasks.
 */
export function coldStripe(s: Readonly<Pick<Settings, 'threads'>>, size: number): number {
  return alignUp(Math.ceil(size / Math.max(1, s.threads)));
}

/** The decisions for a read of `size` bytes at `fileOffset`. */
export interface ReadPlan {
  direct: boolean;
  /** For a read of mostly uncached data under 'auto': the device and whether it went O_DIRECT for it. */
  cold?: { device: string; direct: boolean };
  /** For such a read through the page cache: its task size, one stripe per worker ({@link coldStripe}). */
  stripe?: number;
  /** The mapped runner's piece size and claim divisor, when the mapped route takes part. */
  mapped?: { piece: number; claimDivisor: number };
}

/**
 * Plans a read. Residency is sampled at most once, and only for reads large enough that either
 * decision depends on it. `mappedOut`: the mapped route is out for this read (refused for the
 * file before, or a driver without cuMemHostRegister).
 *
 * O_DIRECT under 'auto': large reads of ranges mostly not cached come from the disk either way;
 * O_DIRECT where the drive reads them faster so ({@link coldReadsDirect}), the page cache's
 * readahead elsewhere.
 *
 * The mapped route under 'auto': large reads into the GPU whose range is in the page cache, by
 * a pool of at most two threads (where it was measured to win). It
 * needs the range's pages to exist (so not past the end of the file: pinning a page there
 * fails) and task boundaries on page boundaries (so no two pieces pin the same page).
 */
export function planRead(s: Readonly<Settings>, facts: ReadFacts, fileOffset: number, size: number, intoDevice: boolean, mappedOut: boolean): ReadPlan {
  let cached: number | undefined;
  const residency = () => (cached ??= facts.residency());
  const cold = s.directIoRead === 'auto' && size >= AUTO_DIRECT_MIN && isCold(residency());
  const storage = cold ? facts.storage() : undefined;
  const direct = s.directIoRead === 'auto' ? cold && coldReadsDirect(storage) : s.directIoRead;
  const plan: ReadPlan = { direct };
  if (cold) plan.cold = { device: storage?.device ?? 'none', direct };
  if (cold && !direct) plan.stripe = coldStripe(s, size);
  if (!intoDevice || direct || mappedOut || s.mappedReads === false) return plan;
  if (fileOffset % 4096 !== 0 || size < 2 * s.taskSize) return plan;
  if (s.mappedReads === 'auto' && (s.threads > AUTO_MAPPED_MAX_THREADS || size < AUTO_MAPPED_MIN || residency() < 1)) return plan;
  const fileSize = facts.fileSize();
  if (fileSize === undefined || fileOffset + size > fileSize) return plan;
  plan.mapped = { piece: MAPPED_PIECE, claimDivisor: MAPPED_CLAIM_DIVISOR };
  // The mapped share takes tasks from the range's end: it keeps the usual split.
  delete plan.stripe;
  return plan;
}

function isCold(cached: number): boolean {
  return cached >= 0 && cached < 0.5;
}

/**
 * Buffered writes under hostStaging: bytes per piece of cache-sized scratch that each writer
 * copies its bytes into before the pwrite (0: none). That copy pays off beside other writers,
 * which it overlaps; a single writer, or a write of one task, would only add it to the time
 * (measured slower).
 */
export function writeScratchPiece(s: Readonly<Settings>, runners: number, tasks: number): number {
  return s.hostStaging && runners !== 1 && tasks > 1 ? WRITE_SCRATCH_PIECE : 0;
}

/** Tasks of one write in flight at once; 0 means every thread. */
export function writeRunners(s: Readonly<Settings>, direct: boolean): number {
  if (direct) return 0;
  return Math.min(s.threads, s.writeThreads === 'auto' ? AUTO_WRITE_THREADS : s.writeThreads);
}

/** The native knobs of a write of `size` bytes, once it is known whether O_DIRECT is really in use. */
export function planWrite(s: Readonly<Settings>, direct: boolean, size: number): { maxRunners: number; writePiece: number; taskSize: number } {
  const maxRunners = writeRunners(s, direct);
  const taskSize = taskSizeFor(s, size, maxRunners || s.threads);
  return { maxRunners, writePiece: writeScratchPiece(s, maxRunners, Math.ceil(size / taskSize)), taskSize };
}
