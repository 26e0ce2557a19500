/**
 * The facts a read's plan asks about an open file, gathered here (system calls) so that the plan
 * itself stays pure: page-cache residency sampled with mincore, and the file's size.
 */
import fs from 'node:fs';
import { native } from '../addon/binding.js';
import type { ReadFacts } from '../plan/transfer-plan.js';

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
  };
}
