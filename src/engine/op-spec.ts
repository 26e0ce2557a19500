/**
 * The native spec of one file transfer, assembled from the transfer plan's decisions
 * (transfer-plan.ts) once the route, the memory and the O_DIRECT descriptor are known.
 */
import type { NativeCuFileSpec, NativeHostSpec, NativeStagedSpec } from '../vocabulary/native-contract.js';
import type { Settings } from '../settings/config.js';
import { bounceBytes } from '../addon/runtime.js';
import { deviceStageScratch, DIRECT_PIECE, hostStagePiece, planWrite, stagePiece, taskSizeFor } from '../plan/transfer-plan.js';
import type { StagedWay } from '../plan/transfer-way.js';

/** What every spec of one transfer shares. */
export interface SpecBase {
  write: boolean;
  fd: number;
  fileOffset: number;
  maxRunners: number;
  writePiece: number;
}

/** A transfer of `size` bytes between the file and host memory (`view` at `hostOffset`), in stripes of `stripe` bytes (uncached reads). */
export function hostSpec(s: Readonly<Settings>, base: SpecBase, size: number, view: NativeHostSpec['host'], hostOffset: number, directFd: number, stripe?: number): NativeHostSpec {
  const { write } = base;
  return {
    ...base, route: 'posix-host', directFd, size, taskSize: stripe ?? taskSizeFor(s, size), host: view, hostOffset,
    // A stripe reads straight into the target: requests as large as the task let readahead run.
    hostStagePiece: write || stripe ? 0 : hostStagePiece(s, size), directPiece: directFd >= 0 ? DIRECT_PIECE : 0,
    ...(write ? planWrite(s, directFd >= 0, size) : {}),
  };
}

/** A staged transfer of `size` bytes between the file and GPU memory at `devicePtr`, the way `way` says (a read's split, its mapped share). */
export function stagedSpec(s: Readonly<Settings>, base: SpecBase, size: number, devicePtr: bigint, device: number, directFd: number, way: StagedWay): NativeStagedSpec {
  const { write } = base;
  const direct = directFd >= 0;
  const mapped = way.variant === 'mapped' ? way.mapped : undefined;
  // Reads come split by the plan; writes are split here, once O_DIRECT is known.
  const shape = way.split ?? planWrite(s, direct, size);
  return {
    ...base, route: 'posix-device', directFd, size, devicePtr, device,
    mapped: mapped !== undefined, mappedPiece: mapped?.piece ?? 0, mappedClaimDivisor: mapped?.claimDivisor ?? 0,
    // A stripe reads straight into the bounce halves, like the host stripes.
    ...shape, stagePiece: stagePiece(shape.taskSize, bounceBytes() / 2, direct, write), stageScratch: way.variant === 'striped' ? 0 : deviceStageScratch(size, direct, write),
  };
}

/** A cuFile transfer of `size` bytes at `memOffset` into the registered GPU buffer at `bufferBase` (cuFile handle `handle`). */
export function cufileSpec(s: Readonly<Settings>, base: SpecBase, size: number, bufferBase: bigint, memOffset: number, device: number, handle: number): NativeCuFileSpec {
  return {
    ...base, route: 'cufile', directFd: -1, size, taskSize: taskSizeFor(s, size), devicePtr: bufferBase + BigInt(memOffset), device,
    cufileHandle: handle, cufileBase: bufferBase, cufileBaseOffset: memOffset,
  };
}
