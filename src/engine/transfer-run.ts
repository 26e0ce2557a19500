/**
 * Runs the way a transfer was planned (transfer-way.ts): its native spec submitted through the
 * one runner (runner.ts), or its read on the calling thread settled as the pool settles one, and
 * its record made of what ran. A way that cannot finish the transfer hands it back instead, for
 * the next plan.
 */
import { native, type NativeOpResult, type NativeOpSpec } from '../addon/binding.js';
import { ensurePool } from '../addon/runtime.js';
import { cufileEvidence } from '../addon/cufile-driver.js';
import type { Settings } from '../settings/config.js';
import type { DeviceBuffer } from '../memory/device-buffer.js';
import type { HostRegion } from '../memory/host-memory.js';
import { fromNative } from '../vocabulary/errors.js';
import { directIoRefusedPieces, mappedRefused, type Reason } from '../vocabulary/reasons.js';
import { usesDirect, type HandedBack, type TransferPlan, type TransferWay } from '../plan/transfer-way.js';
import { readCached, readCachedToDevice, type CachedRead } from './inline-read.js';
import type { KeptFile } from './kept-pages.js';
import { readKept } from './kept-read.js';
import { callingThreadResult, recordOf, stagedAsRun, type OpRecord, type RecordedWay } from './op-record.js';
import { cufileSpec, hostSpec, stagedSpec, type SpecBase } from './op-spec.js';
import { runRecorded, settleInline, type Tally } from './runner.js';
import { classifyCuFile, failedBooking, type Booking, type Route } from './stats.js';
import type { FileTransferState } from './transfer-facts.js';
import { progressOf } from './transfer-options.js';

/** The memory of a transfer, checked: its range lies inside it. */
export type TransferTarget =
  | { kind: 'device'; buffer: DeviceBuffer; memOffset: number }
  | { kind: 'host'; host: HostRegion; memOffset: number };

/** One transfer of one open file, as its ways run it. */
export interface TransferJob {
  settings: Readonly<Settings>;
  path: string;
  fd: number;
  write: boolean;
  size: number;
  fileOffset: number;
  target: TransferTarget;
  signal: AbortSignal | undefined;
  onProgress: ((bytes: number) => void) | undefined;
  /** What the file learns as its ways run (non-blocking reads unsupported, the mapped route or O_DIRECT refused). */
  state: FileTransferState;
  kept: KeptFile;
  /** The file's cuFile handle, for the cufile way. */
  cufileHandle(): number;
  /** Counts a booking in the file's stats and the process's. */
  book(b: Booking): void;
  /** Counts a record as `book` does, and gives it back. */
  count(rec: OpRecord): OpRecord;
}

/** Ways that never hand a transfer back. */
export type FinalWay = Extract<TransferWay, { kind: 'cufile' | 'staged' | 'pool-host' }>;

/** Whether `way` always finishes the transfer (or fails it). */
export function isFinal(way: TransferWay): way is FinalWay {
  return way.kind === 'cufile' || way.kind === 'staged' || way.kind === 'pool-host';
}

/**
 * Runs a final way on the pool: its record, or its error once its failure is counted. Not
 * `async`, so that an error's stack keeps the caller's frame within its ten.
 */
export function runOnPool(way: FinalWay, fallbacks: Reason[], job: TransferJob): Promise<OpRecord> {
  const { target } = job;
  const base: SpecBase = { write: job.write, fd: job.fd, fileOffset: job.fileOffset, maxRunners: 0, writePiece: 0 };
  const directFd = usesDirect(way) ? (job.state.directFd ?? -1) : -1;
  ensurePool();
  if (target.kind === 'host') {
    if (way.kind !== 'pool-host') throw new Error(`the ${way.kind} way has no host memory`);
    const spec = hostSpec(job.settings, base, job.size, target.host.view, target.host.offset + target.memOffset, directFd, way.stripe);
    const run = () => submit(spec, job, (r) => pooled({ kind: 'pool-host' }, 'posix-host', undefined, r, directFd >= 0, fallbacks, job), failedBooking('posix-host', undefined));
    return target.host.pinned ? target.host.pinned.use(run) : run();
  }
  const { buffer, memOffset } = target;
  const device = buffer.device;
  if (way.kind === 'cufile') {
    const spec = cufileSpec(job.settings, base, job.size, buffer.ptr, memOffset, device, job.cufileHandle());
    const before = cufileEvidence(job.write);
    const route = () => classifyCuFile(before, cufileEvidence(job.write));
    return buffer.withBusy(() =>
      submit(spec, job, (r) => recordOf({ kind: 'cufile' }, route(), device, r, false, fallbacks), () => failedBooking(route(), device)),
    );
  }
  if (way.kind !== 'staged') throw new Error(`the ${way.kind} way has no device memory`);
  const spec = stagedSpec(job.settings, base, job.size, buffer.ptr + BigInt(memOffset), device, directFd, way);
  // The buffer may have been freed while the O_DIRECT descriptor opened: withBusy checks.
  return buffer.withBusy(() =>
    submit(spec, job, (r) => pooled(stagedAsRun(r, way.variant), 'posix-device', device, r, directFd >= 0, fallbacks, job), failedBooking('posix-device', device)),
  );
}

/** Submits `spec` with the caller's progress and signal, its record made by `record`, its failure booked as `failure`. */
function submit(spec: NativeOpSpec, job: TransferJob, record: (r: NativeOpResult) => OpRecord, failure: Booking | (() => Booking)): Promise<OpRecord> {
  if (job.onProgress) spec.progress = progressOf(job.onProgress);
  const tally: Tally = { done: job.count, failed: () => job.book(typeof failure === 'function' ? failure() : failure) };
  return runRecorded(() => native().submit(spec), job.signal, job.path, record, tally);
}

/**
 * The record of a pool operation on `route`. O_DIRECT pieces the file system refused, and a
 * mapped share that stopped early or never started, are fallbacks of this operation and are
 * remembered by the file (`route.directIo`, `route.mapped`; the mapped route is not tried again).
 */
function pooled(way: RecordedWay, route: Route, device: number | undefined, r: NativeOpResult, direct: boolean, planned: Reason[], job: TransferJob): OpRecord {
  const fallbacks = [...planned];
  const fellBack = r.directFallback;
  if (fellBack) {
    const code = (fromNative(fellBack.record) as { code?: string }).code ?? 'error';
    const why = directIoRefusedPieces(fellBack.pieces, code);
    job.state.directRefused ??= why;
    fallbacks.push(why);
  }
  const e = r.mapped?.error;
  if (e) {
    const why = mappedRefused(e.code ?? 'ERROR', e.message);
    job.state.mappedRefused ??= why;
    fallbacks.push(why);
  }
  return recordOf(way, route, device, r, direct && !fellBack, fallbacks);
}

/**
 * Runs a way that may hand the transfer back: a read on the calling thread, or a read of kept
 * pages. Its record, or what it handed back.
 */
export async function runHandingBack(plan: TransferPlan, job: TransferJob): Promise<OpRecord | HandedBack> {
  const { way, fallbacks } = plan;
  const { target } = job;
  const tally = (route: Route, device: number | undefined): Tally => ({ done: job.count, failed: () => job.book(failedBooking(route, device)) });
  if (way.kind === 'inline-host' && target.kind === 'host') {
    const r = readCached(job.fd, target.host, target.memOffset, job.size, job.fileOffset);
    return inlineDone(r, { kind: 'inline-host' }, 'posix-host', undefined, fallbacks, job);
  }
  if (target.kind !== 'device') throw new Error(`the ${way.kind} way has no host memory`);
  const { buffer, memOffset } = target;
  const device = buffer.device;
  const devicePtr = buffer.ptr + BigInt(memOffset);
  if (way.kind === 'inline-device') {
    let r: CachedRead;
    try {
      r = readCachedToDevice(job.fd, device, devicePtr, job.size, job.fileOffset, way.split);
    } catch (err) {
      job.book(failedBooking('posix-device', device));
      throw fromNative(err, job.path);
    }
    const helped = typeof r === 'object' && r.helped !== undefined ? { helpedPieces: r.helped } : {};
    return inlineDone(r, { kind: 'inline-device', ...helped }, 'posix-device', device, fallbacks, job);
  }
  if (way.kind !== 'kept') throw new Error(`the ${way.kind} way runs on the pool`);
  const read = { fd: job.fd, fileOffset: job.fileOffset, size: job.size, device, devicePtr, onProgress: job.onProgress && progressOf(job.onProgress), signal: job.signal, fallbacks };
  return buffer.withBusy(() => readKept(job.kept, way.kept, way.onCallingThread, read, tally('mapped-device', device)));
}

/** A read on the calling thread: its record, settled as the pool settles one; or handed back. */
function inlineDone(r: CachedRead, way: RecordedWay, route: Route, device: number | undefined, fallbacks: Reason[], job: TransferJob): Promise<OpRecord> | HandedBack {
  if (r === 'unsupported') job.state.inlineUnsupported = true;
  if (typeof r !== 'object') return { inline: true };
  return settleInline(recordOf(way, route, device, callingThreadResult(r.bytes, r.ns, false), false, fallbacks), job.count, job.onProgress);
}
