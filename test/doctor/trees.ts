/**
 * Hand-built recorded roots for the doctor's tests: small trees of /proc, /sys, /run, /etc and
 * /dev files written under the test's temporary directory.
 */
import fs from 'node:fs';
import path from 'node:path';
import { tmpDir } from '../helpers.js';
import type { PlatformFacts } from '../../src/doctor/index.js';

/** A file's content, `{ link }` for a symbolic link, or null to remove what a copied tree has there. */
export type TreeEntry = string | Buffer | { link: string } | null;

/** Writes a tree (optionally on top of a copy of `from`) and returns its root. */
export function tree(name: string, files: Record<string, TreeEntry>, from?: string): string {
  const root = path.join(tmpDir(), name);
  if (from) fs.cpSync(from, root, { recursive: true, verbatimSymlinks: true });
  for (const [rel, v] of Object.entries(files)) {
    const p = path.join(root, rel);
    fs.mkdirSync(path.dirname(p), { recursive: true });
    fs.rmSync(p, { force: true, recursive: true });
    if (v === null) continue;
    if (typeof v === 'object' && !Buffer.isBuffer(v)) fs.symlinkSync(v.link, p);
    else fs.writeFileSync(p, v);
  }
  return root;
}

/** One L40S at 0000:01:00.0, CUDA 12.8, cuFile 1.15 with nvidia-fs 2.17, NVMe and NVMe-oF back ends. */
export const FACTS: PlatformFacts = {
  cuda: { loaded: true, path: 'libcuda.so.1', initialized: true, driverVersion: 12080, deviceCount: 1 },
  gpus: [{ ordinal: 0, name: 'NVIDIA L40S', totalMemory: 48 * 2 ** 30, pciBusId: '00000000:01:00.0', computeCapability: [8, 9] }],
  cufile: {
    loaded: true, path: 'libcufile.so.0', version: 1150, driverOpen: true, statsLevel: 3,
    props: {
      nvfsMajor: 2, nvfsMinor: 17, pollThresholdKiB: 4, maxDirectIoKiB: 16384, dstatusflags: (1 << 4) | (1 << 5), dcontrolflags: 2,
      fflags: 0, maxDeviceCacheKiB: 0, perBufferCacheKiB: 0, maxDevicePinnedKiB: 0, maxBatchIo: 128, maxBatchIoTimeoutMs: 5,
    },
  },
};

/** What most trees share: nvidia-fs loaded and a udev database. */
export const BASE: Record<string, TreeEntry> = {
  'proc/driver/nvidia-fs/version': 'version: 2.17\n',
  'dev/nvidia-fs0': '',
  'run/udev/data/b1:1': 'E:ID_FS_TYPE=none\n',
};
