/**
 * The facts that say whether cuFile could move a file's data directly at all, each cheap to read
 * (a file's existence under /proc, a small JSON file, two environment variables): read before
 * cuFile's driver is opened, which costs hundreds of milliseconds, so that it is never opened
 * where it can only stage through host memory.
 */
import { envFlag, readCuFileConfig } from './cufile-json.js';
import { SysRoot } from './sysfs.js';

/** What the machine offers cuFile's direct path. */
export interface CuFileDirectPathFacts {
  /** nvidia-fs is loaded: `/proc/driver/nvidia-fs` or `/sys/module/nvidia_fs` exists. */
  nvidiaFs: boolean;
  /** cufile.json in effect asks for the PCI P2PDMA path (`properties.use_pci_p2pdma`). */
  p2pdma: boolean;
  /** What forces cuFile's compat mode, if anything: the variable, or the file's key. */
  forcedCompat?: string;
  /** The cufile.json in effect, and whether it was found. */
  config: { path: string; found: boolean };
}

/** The facts of the machine under `on` (a recorded machine's root, or `/`). */
export function cufileDirectPathFacts(env: NodeJS.ProcessEnv, on: SysRoot): CuFileDirectPathFacts {
  const cfg = readCuFileConfig(on, env);
  const envForce = envFlag(env, 'CUFILE_FORCE_COMPAT_MODE');
  const forcedCompat = envForce === true ? 'CUFILE_FORCE_COMPAT_MODE' : envForce === undefined && cfg.forceCompatMode ? `properties.force_compat_mode in ${cfg.path}` : undefined;
  return {
    nvidiaFs: on.exists('/proc/driver/nvidia-fs') || on.exists('/sys/module/nvidia_fs'),
    p2pdma: cfg.usePciP2pdma === true,
    ...(forcedCompat ? { forcedCompat } : {}),
    config: { path: cfg.path, found: cfg.found },
  };
}
