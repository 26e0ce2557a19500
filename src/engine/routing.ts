/**
 * Per-file routing: whether a file's device I/O goes through cuFile or penstock's staged path,
 * and why. The decision is made once per file (at its first device operation) and kept, with a
 * plain-language reason for every fallback.
 */
import { native } from '../addon/binding.js';
import type { CompatMode } from '../settings/config.js';
import { CuFileError, PenstockError } from '../vocabulary/errors.js';
import { compatModeOn, cufileHandleRefused, type Reason } from '../vocabulary/reasons.js';
import { cufileAccess } from '../addon/cufile-driver.js';

/** A fallback explained: the one Reason of the vocabulary (reasons.ts), under the name the routes give it. */
export type RouteReason = Reason;

/** Where a file's device I/O goes. */
export interface FileRoute {
  /**
   * `cufile`: registered with cuFile (whether cuFile then moves data directly is recorded per
   * operation in the stats); `posix-device`: penstock's staged path; `undecided`: no device I/O yet.
   */
  device: 'cufile' | 'posix-device' | 'undecided';
  /** The `compatMode` the file was opened under. */
  compatMode: CompatMode;
  /** Why the staged path is used, when it is. */
  reason?: RouteReason;
  /** Set when O_DIRECT was asked for but the file system refused it (buffered I/O is used). */
  directIo?: RouteReason;
  /** Set when the mapped route (the GPU copying from page-cache pages) was refused for this file. */
  mapped?: RouteReason;
  /** Set when this file's pages could not be kept registered (the `keptPagesMax` setting). */
  keptPages?: RouteReason;
  /**
   * How reads of this file's uncached data were planned under `directIoRead: 'auto'`: the block
   * device under it (`none` where there is no block device) and whether they went O_DIRECT (on
   * NVMe drives) or through the page cache's readahead (elsewhere). Absent until such a read.
   */
  coldReads?: { device: string; direct: boolean };
}

export class FileRouting {
  #route: FileRoute;
  #handle: number | undefined;
  /** The staged route of operations that ran while cuFile's driver was still opening. */
  #interim: FileRoute | undefined;
  #cold: { device: string; direct: boolean } | undefined;

  constructor(compatMode: CompatMode) {
    this.#route =
      compatMode === 'on'
        ? {
            device: 'posix-device',
            compatMode,
            reason: compatModeOn(),
          }
        : { device: 'undecided', compatMode };
  }

  get route(): FileRoute {
    const r = this.#route.device === 'undecided' && this.#interim ? this.#interim : this.#route;
    return { ...r, ...(r.reason ? { reason: { ...r.reason } } : {}), ...(this.#cold ? { coldReads: { ...this.#cold } } : {}) };
  }

  /** Records how the last read of uncached data was planned (see {@link FileRoute.coldReads}). */
  noteColdReads(cold: { device: string; direct: boolean }): void {
    this.#cold = { ...cold };
  }

  get cufileHandle(): number | undefined {
    return this.#handle;
  }

  /**
   * Decides the file's device route on first use. In `'off'` mode any obstacle is thrown as an
   * error; in `'auto'` it becomes the recorded reason for the staged path. While cuFile's driver
   * opens in the background the answer is a staged route for this operation only
   * (`CUFILE_OPENING`), and the file is decided at a later one.
   */
  decide(fd: number): FileRoute {
    if (this.#route.device !== 'undecided') {
      if (this.#route.compatMode === 'off' && this.#route.device !== 'cufile') throw this.#requiredError();
      return this.#route;
    }
    const access = cufileAccess(this.#route.compatMode);
    if (!access.ready && !access.final) {
      // Decided later: this operation is staged, and says why.
      return (this.#interim = { device: 'posix-device', compatMode: this.#route.compatMode, reason: access.reason });
    }
    if (!access.ready) {
      this.#route = { device: 'posix-device', compatMode: this.#route.compatMode, reason: access.reason };
    } else {
      const r = native().cufileRegister(fd);
      if (r.handle !== undefined) {
        this.#handle = r.handle;
        this.#route = { device: 'cufile', compatMode: this.#route.compatMode };
      } else {
        const code = r.error?.code ?? 'CU_FILE_ERROR';
        const num = r.error?.number ?? 0;
        this.#route = {
          device: 'posix-device',
          compatMode: this.#route.compatMode,
          reason: cufileHandleRefused(code, num),
        };
      }
    }
    if (this.#route.compatMode === 'off' && this.#route.device !== 'cufile') throw this.#requiredError();
    return this.#route;
  }

  #requiredError(): PenstockError {
    const reason = this.#route.reason!;
    const message = `compatMode is 'off' (cuFile required), but cuFile cannot be used for this file: ${reason.message}`;
    if (reason.cufileCode) return new CuFileError(reason.cufileCode, reason.cufileNumber ?? 0, message, 'cuFileHandleRegister');
    return new PenstockError('ERR_PENSTOCK_CUFILE_REQUIRED', message);
  }

  /** Releases the cuFile handle (before the descriptor closes). */
  release(): void {
    if (this.#handle !== undefined) {
      native().cufileDeregister(this.#handle);
      this.#handle = undefined;
    }
  }
}
