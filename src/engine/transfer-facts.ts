/**
 * The facts a transfer's plan asks about an open file and the process, gathered here (system
 * calls, the addon, the file's state) so that the plan itself stays pure: page-cache residency
 * sampled with mincore, the file's size, the block device under it, the file's device route and
 * kept pages, what the CUDA driver can do, and what is in flight. Each costly fact is gathered on
 * its first ask and kept for the rest of the operation.
 */
import fs from 'node:fs';
import { native } from '../addon/binding.js';
import { cudaStatus, poolSpinnerCount } from '../addon/runtime.js';
import type { ReadFacts } from '../plan/transfer-plan.js';
import type { FileRouteState, TransferFacts, TransferRequest } from '../plan/transfer-way.js';
import type { Settings } from '../settings/config.js';
import type { Reason } from '../vocabulary/reasons.js';
import type { KeptFile } from './kept-pages.js';
import type { FileRouting } from './routing.js';
import { currentSettings } from '../settings/current.js';
import { storageOf, type StorageFacts } from '../system/block-device.js';
import { SysRoot } from '../system/sysfs.js';

const storageByDev = new Map<string, StorageFacts | undefined>();

/** The storage under `fd`, read once per device and system root. */
export function storageUnder(fd: number): StorageFacts | undefined {
  let dev: number;
  try {
    dev = fs.fstatSync(fd).dev;
  } catch {
    return undefined;
  }
  const root = currentSettings().systemRoot;
  const key = `${root}\0${dev}`;
  if (!storageByDev.has(key)) storageByDev.set(key, storageOf(dev, new SysRoot(root)));
  return storageByDev.get(key);
}

/** Pages sampled by mincore for a residency estimate. */
const RESIDENCY_SAMPLES = 64;

/** The share of a range's pages in the page cache, 0 to 1, from 64 sampled pages of it. */
export function residencyOf(fd: number, fileOffset: number, size: number): number {
  return native().residency(fd, fileOffset, size, RESIDENCY_SAMPLES);
}

/** The facts of a read of `size` bytes at `fileOffset` of `fd`, each gathered when first asked for. */
export function readFactsOf(fd: number, fileOffset: number, size: number): ReadFacts {
  return {
    residency: () => residencyOf(fd, fileOffset, size),
    fileSize: () => {
      try {
        return fs.fstatSync(fd).size;
      } catch {
        return undefined;
      }
    },
    storage: () => storageUnder(fd),
  };
}

/** What a file learns about its transfers as they run, beyond its device route. */
export interface FileTransferState {
  /** Its file system has no non-blocking reads (RWF_NOWAIT). */
  inlineUnsupported: boolean;
  /** Why the mapped route was refused for this file (`route.mapped`). */
  mappedRefused?: Reason;
  /** Why O_DIRECT does not carry (all of) this file's transfers (`route.directIo`). */
  directRefused?: Reason;
  /** The O_DIRECT descriptor: undefined until first needed, -1 where it could not be had. */
  directFd?: number;
}

/** The plan's view of `state`. */
export function fileRouteState(state: FileTransferState): FileRouteState {
  const { directFd } = state;
  const directIo = directFd === undefined ? 'untried' : directFd >= 0 ? 'open' : (state.directRefused ?? 'untried');
  return { inlineUnsupported: state.inlineUnsupported, mappedRefused: state.mappedRefused !== undefined, directIo };
}

/** `f`, called at most once. */
function once<T>(f: () => T): () => T {
  let got: { value: T } | undefined;
  return () => (got ??= { value: f() }).value;
}

/** What the facts of one transfer of an open file are gathered from. */
export interface FactSources {
  settings: Readonly<Settings>;
  fd: number;
  routing: FileRouting;
  kept: KeptFile;
  state: FileTransferState;
}

/**
 * The facts of `request` on the file of `from`. The file's route state is read anew at each ask
 * (a way tried before may have changed it); the rest is gathered once.
 */
export function transferFactsOf(request: TransferRequest, from: FactSources): TransferFacts {
  const { fd, routing, kept, settings, state } = from;
  const { fileOffset, size } = request;
  const read = readFactsOf(fd, fileOffset, size);
  const residency = once(read.residency);
  return {
    settings,
    compatMode: routing.route.compatMode,
    cufileRoute: once(() => routing.decide(fd).device === 'cufile'),
    hostRegister: once(() => cudaStatus().hostRegister === true),
    keptOffer: once(() => kept.plan(settings, fileOffset, size, residency)),
    inflight: () => native().inflight(),
    poolSpinners: poolSpinnerCount,
    get file() {
      return fileRouteState(state);
    },
    read: { residency, fileSize: once(read.fileSize), storage: once(read.storage) },
  };
}
