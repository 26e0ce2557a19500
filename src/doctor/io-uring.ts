/**
 * Whether batched reads can go through io_uring here (src/native/read_ring.cc): the kernel's
 * version, its `kernel.io_uring_disabled` sysctl, and a seccomp filter on this process (container
 * runtimes' default profiles often refuse io_uring). Where a ring cannot be had, batches still
 * work, a pread per read, and their record says why; this check says it before.
 */
import type { SysRoot } from '../system/sysfs.js';
import type { Check } from './types.js';

/** The first kernel with the ring operation penstock uses (IORING_OP_READ). */
const MIN_KERNEL: [number, number] = [5, 6];

/** The io_uring check, from the root's procfs and the kernel release (`/proc/version`). */
export function ioUringCheck(root: SysRoot, release: string | undefined): Check {
  const v = /^(\d+)\.(\d+)/.exec(release ?? '');
  const kernel = v ? [Number(v[1]), Number(v[2])] : undefined;
  const oldKernel = kernel ? kernel[0]! < MIN_KERNEL[0] || (kernel[0] === MIN_KERNEL[0] && kernel[1]! < MIN_KERNEL[1]) : false;
  const sysctl = root.line('/proc/sys/kernel/io_uring_disabled');
  const disabled = sysctl === undefined || !/^\d+$/.test(sysctl) ? undefined : Number(sysctl);
  const seccompLine = /^Seccomp:\s*(\d+)/m.exec(root.text('/proc/self/status') ?? '');
  const seccomp = seccompLine ? Number(seccompLine[1]) : undefined;
  const data = { kernel: release, disabled, seccomp };
  const title = 'io_uring';
  const byPread = 'batched reads go by one pread per read, which costs more per range';
  if (oldKernel)
    return { id: 'platform.io_uring', status: 'warn', title, summary: `kernel ${release} is older than ${MIN_KERNEL.join('.')}: ${byPread}`, data };
  if (disabled === 2)
    return {
      id: 'platform.io_uring', status: 'warn', title, summary: `kernel.io_uring_disabled = 2 (io_uring off for every process): ${byPread}`,
      fix: 'sysctl -w kernel.io_uring_disabled=0 lets every process create rings (1: only root and the kernel.io_uring_group group).', data,
    };
  if (disabled === 1)
    return {
      id: 'platform.io_uring', status: 'warn', title, summary: `kernel.io_uring_disabled = 1: only root and members of kernel.io_uring_group may create rings; otherwise ${byPread}`,
      fix: 'Add this user to the group in kernel.io_uring_group, or sysctl -w kernel.io_uring_disabled=0.', data,
    };
  if (seccomp === 2)
    return {
      id: 'platform.io_uring', status: 'info', title,
      summary: `a seccomp filter is in force on this process; if it refuses io_uring_setup (container runtimes' default profiles often do), ${byPread}`,
      fix: 'A batch record says whether its reads went through io_uring (ringReads, and IO_URING_UNAVAILABLE among its fallbacks). To allow it, let io_uring_setup and io_uring_enter through the seccomp profile.',
      data,
    };
  return { id: 'platform.io_uring', status: 'pass', title, summary: `allowed (kernel ${release ?? 'version unknown'}${disabled === undefined ? '' : `, kernel.io_uring_disabled = ${disabled}`})`, data };
}
