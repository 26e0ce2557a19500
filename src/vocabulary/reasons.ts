/**
 * One vocabulary of routes and fallback reasons, shared by the runtime (which records why a
 * read or a file went another way than it could have) and the doctor (which predicts it). Every
 * fallback code is defined here once (REASON_CODES), with the function that writes its sentence,
 * so that a prediction and a record of the same cause read alike, and a record can carry no
 * code that is not in the vocabulary.
 */
import type { CudaStatus, CuFileStatus, NativeErrorRecord } from './native-contract.js';

/**
 * - `gds`: cuFile moved the data by DMA between storage and GPU memory (cuFile's counters show
 *   nvfs/p2p I/O and no POSIX I/O during the operation).
 * - `cufile-compat`: cuFile accepted the file but staged through host memory itself.
 * - `cufile-unknown`: cuFile carried the I/O, and whether it was direct cannot be known (no
 *   statistics from this cuFile, or concurrent I/O of both kinds).
 * - `posix-device`: penstock's staged path (pread into pinned buffers, copy to the GPU).
 * - `mapped-device`: part of a warm staged read that the GPU copied straight out of the file's
 *   page-cache pages (mapped read-only and registered with CUDA): no CPU copy, no storage DMA.
 * - `posix-host`: parallel pread/pwrite straight into host memory.
 */
export type Route = 'gds' | 'cufile-compat' | 'cufile-unknown' | 'posix-device' | 'mapped-device' | 'posix-host';

/** What each route means, in one phrase (the doctor's verdicts and `penstock info` use these). */
export const ROUTE_MEANINGS: Readonly<Record<Route, string>> = {
  gds: 'GPUDirect Storage, DMA between the drive and GPU memory',
  'cufile-compat': 'cuFile accepts the file but stages it through host memory',
  'cufile-unknown': 'cuFile carried the I/O; whether it was direct is not known',
  'posix-device': "penstock's staged path through pinned host memory",
  'mapped-device': "the GPU copies straight out of the file's page-cache pages",
  'posix-host': 'host memory only (no GPU involved)',
};

/**
 * How close a route is to the direct path (higher is closer): how the doctor tells a
 * measurement that did better than predicted from one that did worse.
 */
export const ROUTE_RANK: Readonly<Record<Route, number>> = {
  gds: 4, 'cufile-compat': 3, 'cufile-unknown': 3, 'mapped-device': 2, 'posix-device': 1, 'posix-host': 0,
};

/** Reason codes for a file's device I/O not going through cuFile, each with its meaning. */
export const ROUTE_REASON_CODES = {
  COMPAT_MODE_ON: "penstock's compatMode is 'on': cuFile is never used",
  CUFILE_NOT_LOADED: 'libcufile could not be loaded',
  NO_CUDA: 'no usable CUDA driver or GPU',
  CUFILE_DRIVER_OPEN_FAILED: 'cuFileDriverOpen failed',
  CUFILE_HANDLE_REFUSED: 'cuFileHandleRegister refused the file',
  CUFILE_NO_DIRECT_PATH: "cuFile's driver was not opened: neither nvidia-fs nor PCI P2PDMA gives it a direct path here",
  CUFILE_COMPAT_FORCED: "cuFile's driver was not opened: its configuration forces compat mode (staging through host memory)",
  CUFILE_OPENING: "cuFile's driver was still opening in the background: the operation was staged",
} as const;

export type RouteReasonCode = keyof typeof ROUTE_REASON_CODES;

/** Whether `r` says why a file's device I/O does not go through cuFile (one of ROUTE_REASON_CODES). */
export function isRouteReason(r: { code: string }): boolean {
  return Object.hasOwn(ROUTE_REASON_CODES, r.code);
}

/**
 * Every code a fallback can be recorded with, each with its meaning: why a file's device I/O does
 * not go through cuFile (ROUTE_REASON_CODES), and why a read, or part of one, went another way
 * than planned.
 */
export const REASON_CODES = {
  ...ROUTE_REASON_CODES,
  DIRECT_IO_REFUSED: 'the file system refused O_DIRECT: buffered I/O carried the transfer (or those pieces of it)',
  MAPPED_REFUSED: "the GPU could not copy straight from the file's page-cache pages: the staged path carries its reads",
  KEPT_PAGES_STALE: "the file changed since its kept pages were registered: they were released and the range read through staging",
  KEPT_PAGES_RECENT: 'the file changed too recently for its pages to be kept: the range was read through staging',
  KEPT_PAGES_PAST_END: 'the file no longer holds the whole range: its pages were not kept',
  KEPT_PAGES_NOT_CACHED: 'not all of the range is in the page cache: its pages were not kept',
  KEPT_PAGES_REFUSED: "the file's pages could not be registered: its reads go through staging",
  IO_URING_UNAVAILABLE: "io_uring could not be used: a batch's reads went by one pread each",
  COPY_BATCH_UNAVAILABLE: "the CUDA driver has no cuMemcpyBatchAsync: a batch's copies went one call each",
} as const;

/** A fallback's code: one of REASON_CODES. */
export type ReasonCode = keyof typeof REASON_CODES;

/** A fallback explained: a stable code and a sentence for people, with what to do about it. */
export interface Reason {
  /** A stable code from REASON_CODES, e.g. `CUFILE_HANDLE_REFUSED`. */
  code: ReasonCode;
  /** The reason in a sentence, with what to do about it. */
  message: string;
  /** cuFile's status name, where cuFile refused the file. */
  cufileCode?: string;
  /** cuFile's numeric status, where cuFile refused the file. */
  cufileNumber?: number;
}

/** A sentence saying why device memory cannot be used, or undefined when it can. */
export function cudaProblem(s: CudaStatus): string | undefined {
  if (!s.loaded) return `the CUDA driver library (${s.path}) could not be loaded: ${s.error ?? 'unknown error'}`;
  if (!s.initialized) return `cuInit failed with ${s.initError?.code ?? 'an error'}: ${s.initError?.message ?? ''}`.trim();
  if (!s.deviceCount) return 'the CUDA driver reports no GPU';
  return undefined;
}

/** compatMode 'on': the runtime's record and the doctor's prediction. */
export function compatModeOn(): Reason {
  return {
    code: 'COMPAT_MODE_ON',
    message: "compatMode is 'on' (PENSTOCK_COMPAT_MODE=on or configure()): cuFile is never used, device I/O is staged through pinned host memory; unset it to let cuFile take files.",
  };
}

/** The cost of cuFile's driver open that penstock saves where it cannot pay back (measured on an H200 machine). */
const DRIVER_OPEN_COST = 'about 0.4 s';

/**
 * Neither nvidia-fs nor PCI P2PDMA: cuFile would accept files at best in compat mode, staging
 * through host memory, which penstock's own staged path does faster; its driver is not opened.
 */
export function cufileNoDirectPath(config: { path: string; found: boolean }): Reason {
  return {
    code: 'CUFILE_NO_DIRECT_PATH',
    message:
      `cuFile's driver was not opened: nvidia-fs is not loaded (no /proc/driver/nvidia-fs) and PCI P2PDMA is not enabled ` +
      `(properties.use_pci_p2pdma in ${config.path}${config.found ? '' : ', which does not exist'}), so cuFile could only stage through host memory, ` +
      `which penstock's staged path does faster; opening it would cost ${DRIVER_OPEN_COST}. Load nvidia-fs or enable P2PDMA for GPUDirect Storage, ` +
      `or set compatMode 'off' to require cuFile.`,
  };
}

/** cuFile's configuration forces compat mode: its driver is not opened. */
export function cufileCompatForced(what: string): Reason {
  return {
    code: 'CUFILE_COMPAT_FORCED',
    message:
      `cuFile's driver was not opened: ${what} forces cuFile's compat mode, in which it stages through host memory, ` +
      `which penstock's staged path does faster; opening it would cost ${DRIVER_OPEN_COST}. For GPUDirect Storage, remove ${what}.`,
  };
}

/** The background open of cuFile's driver had not finished when the operation started. */
export function cufileOpening(): Reason {
  return {
    code: 'CUFILE_OPENING',
    message:
      "cuFile's driver was still opening in the background when this operation started, so it was staged through pinned host memory; " +
      'operations that start once the driver is open go to cuFile.',
  };
}

/** Why cuFile cannot be used at all, from its status and the CUDA problem (if any). */
export function cufileUnavailableReason(s: CuFileStatus, cuda: string | undefined): Reason | undefined {
  if (!s.loaded) {
    const urcu = /liburcu/.test(s.error ?? '');
    return {
      code: 'CUFILE_NOT_LOADED',
      message: `cuFile (${s.path}) could not be loaded: ${s.error ?? 'unknown error'}. ${urcu
        ? 'libcufile needs the userspace RCU library: install liburcu (e.g. apt-get install liburcu8).'
        : "Install NVIDIA's GPUDirect Storage package (libcufile) or point PENSTOCK_CUFILE_LIBRARY at it."}`,
    };
  }
  if (cuda) return { code: 'NO_CUDA', message: `cuFile needs a usable GPU: ${cuda}` };
  if (!s.driverOpen)
    return {
      code: 'CUFILE_DRIVER_OPEN_FAILED',
      message: `cuFileDriverOpen failed with ${s.driverError?.code ?? 'an error'} (${s.driverError?.number ?? '?'}); read cufile.log (or run "penstock doctor --probe") for cuFile's own reason.`,
    };
  return undefined;
}

/**
 * Why a batch's reads went by one pread each instead of through io_uring, from the error the
 * addon met setting up or entering a ring.
 */
export function ringFallbackReason(error: NativeErrorRecord): Reason {
  return {
    code: 'IO_URING_UNAVAILABLE',
    message:
      `io_uring could not be used (${error.code}: ${error.message}), so the batch's reads went by one pread each, ` +
      'which costs more per range. Kernels before 5.6, seccomp profiles that block io_uring (containers often do), ' +
      'the kernel.io_uring_disabled sysctl and a low RLIMIT_MEMLOCK on old kernels turn it off.',
  };
}

/**
 * Why a batch's copies to the GPU went one call each where its ranges lay apart there: the
 * driver has no call that takes many.
 */
export function copyBatchFallbackReason(fills: number): Reason {
  return {
    code: 'COPY_BATCH_UNAVAILABLE',
    message:
      `The CUDA driver has no cuMemcpyBatchAsync (drivers for CUDA 12.8 and later have it), so ${fills} fill${fills === 1 ? '' : 's'} ` +
      'of staging whose ranges lie apart on the GPU were copied one call per range, which the driver serialises ' +
      '(about 0.4 M copies/s on an H200, against 1.6–2 M/s in batches). A newer driver, or targets packed so that ' +
      'each range lands right after the one before it on the GPU, avoid it.',
  };
}

/** The sentence for a cuFileHandleRegister refusal, by cuFile's status number. */
export function handleRefusalSentence(code: string, num: number): string {
  switch (num) {
    case 5027:
      return (
        `cuFile refused to register this file (${code}, ${num}). cuFile does this when it cannot read the ` +
        `block device's udev properties (ID_FS_USAGE, ID_FS_TYPE): a container or VM without /run/udev, or a ` +
        `device udev knows nothing of. It also does it for file systems and devices it does not support. ` +
        `Run "penstock doctor <file>" for this file's details.`
      );
    case 5019:
      return `cuFile refused the file's open flags (${code}, ${num}): O_APPEND, O_NONBLOCK, O_NOATIME and O_TMPFILE are not supported.`;
    case 5018:
      return `cuFile does not support this kind of file (${code}, ${num}); only regular files on supported file systems.`;
    case 5034:
      return `I/O to this file system is disabled in cuFile's configuration (denylisted) (${code}, ${num}).`;
    default:
      return `cuFileHandleRegister failed with ${code} (${num}); see cufile.log and "penstock doctor <file>".`;
  }
}

/**
 * The words accepted as a boolean in environment variables (penstock's and cuFile's):
 * true, false, or undefined for anything else.
 */
export function parseBooleanWord(v: string): boolean | undefined {
  if (/^(1|true|yes|on)$/i.test(v)) return true;
  if (/^(0|false|no|off)$/i.test(v)) return false;
  return undefined;
}

/** cuFileHandleRegister refused the file: its status name and number, and what it means. */
export function cufileHandleRefused(code: string, num: number): Reason {
  return { code: 'CUFILE_HANDLE_REFUSED', message: handleRefusalSentence(code, num), cufileCode: code, cufileNumber: num };
}

/** The O_DIRECT descriptor could not be had (`why`: the open's error code, or what was wrong). */
export function directIoUnavailable(why: string): Reason {
  return { code: 'DIRECT_IO_REFUSED', message: `O_DIRECT could not be used for this file (${why}): buffered I/O is used instead.` };
}

/** The file system refused O_DIRECT for `pieces` pieces of a transfer (`code`: its error), which went buffered. */
export function directIoRefusedPieces(pieces: number, code: string): Reason {
  return {
    code: 'DIRECT_IO_REFUSED',
    message: `The file system refused O_DIRECT for ${pieces} piece(s) of a transfer (${code}): those went through the page cache.`,
  };
}

/** The mapped share (the GPU copying from page-cache pages) was refused with `code`: `message`. */
export function mappedRefused(code: string, message: string): Reason {
  return {
    code: 'MAPPED_REFUSED',
    message: `The GPU could not copy straight from this file's page cache (${code}: ${message}); penstock's staged path carries its reads instead.`,
  };
}

/** Kept pages whose file changed since they were registered. */
export function keptPagesStale(): Reason {
  return {
    code: 'KEPT_PAGES_STALE',
    message: "The file's size or times changed since this range's pages were registered, so they may no longer be the file's: they were released and the range was read again through staging.",
  };
}

/** A file changed less than `settleMs` ago: its pages are not kept yet. */
export function keptPagesRecent(settleMs: number): Reason {
  return {
    code: 'KEPT_PAGES_RECENT',
    message: `The file changed less than ${settleMs} ms ago, too recently for a later change to be seen in its times, so this range's pages were not kept; the range was read through staging.`,
  };
}

/** The file no longer holds the whole range to keep. */
export function keptPagesPastEnd(): Reason {
  return { code: 'KEPT_PAGES_PAST_END', message: 'The file no longer holds the whole range, so its pages were not kept; the range was read through staging.' };
}

/** A range read again whose pages are not all in the page cache. */
export function keptPagesNotCached(): Reason {
  return {
    code: 'KEPT_PAGES_NOT_CACHED',
    message: 'This range was read before, but not all of its pages are in the page cache, so they were not kept: pinning them would first read them from storage, a page at a time, and hold them in memory; the range was read the usual way.',
  };
}

/** A registration failed with `code`: `message`; the file keeps nothing more. */
export function keptPagesRefused(code: string, message: string): Reason {
  return { code: 'KEPT_PAGES_REFUSED', message: `This file's pages could not be kept registered (${code}: ${message}); its reads go through staging.` };
}
