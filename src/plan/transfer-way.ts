/**
 * Which way one read or write moves, chosen from facts gathered by the caller: a pure function
 * of the request and the facts, with no I/O of its own (a fact that costs a system call is a
 * callback, asked only where a decision needs it). A way that can hand the operation back (a read
 * on the calling thread that finds a page missing, a read of kept pages that the addon refuses)
 * is followed by planning again with what it handed back, so the next way comes from here too.
 */
import type { CompatMode, Settings } from '../settings/config.js';
import type { Reason } from '../vocabulary/reasons.js';
import { inlineDeviceSplit, planDeviceRead, planRead, readsInline, readsInlineToDevice, type ReadFacts } from './transfer-plan.js';

/** One read or write, as asked. */
export interface TransferRequest {
  op: 'read' | 'write';
  /** The memory read into or written from. */
  memory: 'device' | 'host';
  size: number;
  fileOffset: number;
  /** What ways tried before in this operation handed back; each hands back at most once. */
  handedBack?: HandedBack;
}

/** What ways tried earlier in an operation handed back, for the next plan. */
export interface HandedBack {
  /** The read of kept pages was refused before any byte moved: why. */
  kept?: Reason;
  /** The read of kept pages on the calling thread found the GPU's inline stream in use. */
  keptStreamBusy?: true;
  /** The read on the calling thread could not move every byte (not cached, end of file, staging in use). */
  inline?: true;
}

/**
 * A read of kept pages (kept-pages.ts decides which): span `id`, registered first when `keep`.
 * With `issue`, its copy is queued on the calling thread and the pool only waits for it, so the
 * worker's wake-up (about 40 µs on an H200, docs/performance.md) overlaps the copy instead of
 * coming before it. A registering read cannot: registration is slow, and belongs on a worker.
 */
export interface KeptPlan {
  id: number;
  keep: boolean;
  issue: boolean;
}

/** What the file learnt from earlier operations, as plain values. */
export interface FileRouteState {
  /** Its file system has no non-blocking reads: reads on the calling thread are not tried. */
  inlineUnsupported: boolean;
  /** The mapped route was refused for this file. */
  mappedRefused: boolean;
  /** Its O_DIRECT descriptor: not asked for yet, open, or refused (why). */
  directIo: 'untried' | 'open' | Reason;
}

/** Everything a plan may depend on besides the request. */
export interface TransferFacts {
  settings: Readonly<Settings>;
  /** The file's compatMode. */
  compatMode: CompatMode;
  /**
   * Whether the file's device I/O goes through cuFile, decided on the first ask (may throw in
   * compatMode 'off'). Why not, where not, is the file's (`route.reason`), not each operation's.
   */
  cufileRoute(): boolean;
  /** The CUDA driver can register host memory (the mapped route and kept pages need it). */
  hostRegister(): boolean;
  /** What kept pages offer this range: a read of them, the reason they are not kept, or nothing. */
  keptOffer(): KeptPlan | Reason | undefined;
  /** Operations of this thread in flight now. */
  inflight(): number;
  /** Pool workers watching the queue, who can help a read on the calling thread. */
  poolSpinners(): number;
  file: FileRouteState;
  /** Residency, size and storage of the range. */
  read: ReadFacts;
}

/** How reads of mostly uncached data were planned under directIoRead 'auto'. */
export interface ColdRead {
  device: string;
  direct: boolean;
}

/** The mapped share of a staged read: its piece size and claim divisor. */
export interface MappedShare {
  piece: number;
  claimDivisor: number;
}

/** How a read on the calling thread into the GPU is cut: bytes per piece, pool workers asked to help, through scratch or not. */
export type InlineDeviceSplit = ReturnType<typeof inlineDeviceSplit>;

/** Bytes per task of a staged read into the GPU, and the gather stage's copy size (0: not gathered). */
export interface DeviceReadSplit {
  taskSize: number;
  gatherCopy: number;
}

/**
 * Pool tasks through the workers' pinned staging. `bounce`: each task through its worker's
 * bounce halves (with O_DIRECT where `direct`); `striped`: the same for a read of uncached data
 * through the page cache, one stripe per worker read front to back straight into the halves, so
 * readahead follows each; `gathered`: tasks streamed into the GPU's gather stage, copied in order
 * while the rest are read; `mapped`: the bounce halves from the front and the GPU copying
 * page-cache pages from the back. Reads carry their split; writes are split by op-spec.ts.
 */
export type StagedWay =
  | { kind: 'staged'; variant: 'bounce'; direct: boolean; split?: DeviceReadSplit; cold?: ColdRead }
  | { kind: 'staged'; variant: 'striped'; direct: false; split: DeviceReadSplit; cold?: ColdRead }
  | { kind: 'staged'; variant: 'gathered'; direct: false; split: DeviceReadSplit; cold?: ColdRead }
  | { kind: 'staged'; variant: 'mapped'; direct: false; split: DeviceReadSplit; mapped: MappedShare; cold?: ColdRead };

/** The ways a read or write moves. */
export type TransferWay =
  /** cuFile's read or write, task by task. */
  | { kind: 'cufile' }
  /** One copy by the GPU out of page-cache pages kept registered, on the calling thread or through the pool. */
  | { kind: 'kept'; kept: KeptPlan; onCallingThread: boolean }
  /** Preads from the page cache into the GPU's inline staging on the calling thread, with pool workers helping as `split` says. */
  | { kind: 'inline-device'; split: InlineDeviceSplit }
  | StagedWay
  /** One non-blocking pread on the calling thread, from the page cache into host memory. */
  | { kind: 'inline-host' }
  /** Pool tasks straight between the file and host memory; a read of uncached data through the page cache in one `stripe` per worker. */
  | { kind: 'pool-host'; direct: boolean; stripe?: number; cold?: ColdRead };

/** A plan: the way, and the fallbacks met on the way to it (faster ways not taken, and why). */
export interface TransferPlan {
  way: TransferWay;
  fallbacks: Reason[];
}

/** Whether `way` goes through the file's O_DIRECT descriptor. */
export function usesDirect(way: TransferWay): boolean {
  return (way.kind === 'staged' || way.kind === 'pool-host') && way.direct;
}

/**
 * The way to move `request`. Device memory: cuFile where the file's route is cuFile and the
 * size reaches gdsThreshold (always, in compatMode 'off'); else, for reads, kept pages where they
 * hold the range, a read on the calling thread where it is small and nothing else is in flight,
 * and the staged way. Host memory: a read on the calling thread where it is small, else the pool.
 * A faster way that was asked about and could not be taken adds its reason to the fallbacks
 * (kept pages, O_DIRECT); why not cuFile is the file's route, not a fallback of each operation.
 */
export function planTransfer(request: TransferRequest, facts: TransferFacts): TransferPlan {
  const s = facts.settings;
  const { size } = request;
  const read = request.op === 'read';
  const back = request.handedBack ?? {};
  const fallbacks: Reason[] = [];
  const plan = (way: TransferWay): TransferPlan => ({ way, fallbacks });
  const inlineOpen = read && !back.inline && !facts.file.inlineUnsupported;

  if (request.memory === 'host') {
    if (inlineOpen && readsInline(s, size)) return plan({ kind: 'inline-host' });
    const p = poolDecision(request, facts, fallbacks);
    return plan({ kind: 'pool-host', direct: p.direct, ...(p.stripe ? { stripe: p.stripe } : {}), ...(p.cold ? { cold: p.cold } : {}) });
  }

  if ((facts.compatMode === 'off' || size >= s.gdsThreshold) && facts.cufileRoute()) return plan({ kind: 'cufile' });
  if (read) {
    if (back.kept) fallbacks.push(back.kept);
    else if (s.directIoRead !== true && facts.hostRegister()) {
      const offer = facts.keptOffer();
      if (offer && 'id' in offer) {
        const onCallingThread = !back.keptStreamBusy && !offer.keep && size <= s.inlineReadMax && facts.inflight() === 0;
        return plan({ kind: 'kept', kept: offer, onCallingThread });
      }
      if (offer) fallbacks.push(offer);
    }
    if (inlineOpen && readsInlineToDevice(s, size, facts.inflight)) return plan({ kind: 'inline-device', split: inlineDeviceSplit(size, facts.poolSpinners()) });
  }
  const p = poolDecision(request, facts, fallbacks);
  const cold = p.cold ? { cold: p.cold } : {};
  if (!read) return plan({ kind: 'staged', variant: 'bounce', direct: p.direct, ...cold });
  if (p.stripe) return plan({ kind: 'staged', variant: 'striped', direct: false, split: { taskSize: p.stripe, gatherCopy: 0 }, ...cold });
  const split = planDeviceRead(s, size, p.direct, p.mapped !== undefined);
  if (p.mapped) return plan({ kind: 'staged', variant: 'mapped', direct: false, split, mapped: p.mapped, ...cold });
  if (split.gatherCopy > 0) return plan({ kind: 'staged', variant: 'gathered', direct: false, split, ...cold });
  return plan({ kind: 'staged', variant: 'bounce', direct: p.direct, split, ...cold });
}

/**
 * What a transfer on the pool needs decided: O_DIRECT (as planned, but not where the file's
 * descriptor was refused: that refusal is a fallback), how cold data was planned (and the stripe
 * of each worker where it goes through the page cache), and a read's mapped share.
 */
function poolDecision(request: TransferRequest, facts: TransferFacts, fallbacks: Reason[]): { direct: boolean; cold?: ColdRead; stripe?: number; mapped?: MappedShare } {
  const s = facts.settings;
  const device = request.memory === 'device';
  let wanted: boolean;
  let cold: ColdRead | undefined;
  let mapped: MappedShare | undefined;
  let stripe: number | undefined;
  if (request.op === 'write') wanted = s.directIoWrite;
  else {
    const mappedOut = facts.file.mappedRefused || (device && !facts.hostRegister());
    const p = planRead(s, facts.read, request.fileOffset, request.size, device, mappedOut);
    ({ direct: wanted, cold, mapped, stripe } = p);
  }
  const refused = typeof facts.file.directIo === 'object' ? facts.file.directIo : undefined;
  if (wanted && refused) fallbacks.push(refused);
  return { direct: wanted && !refused, ...(cold ? { cold } : {}), ...(stripe ? { stripe } : {}), ...(mapped ? { mapped } : {}) };
}
