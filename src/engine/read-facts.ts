/**
 * The facts a read's plan asks about an open file, gathered here (system calls) so that the plan
 * itself stays pure: page-cache residency sampled with mincore, the file's size, and the block
 * device under it.
 */
import fs from 'node:fs';
import { native } from '../addon/binding.js';
import type { ReadFacts } from '../plan/transfer-plan.js';
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
