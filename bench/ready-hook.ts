/**
 * Loaded with `node --import` into `penstock load` by `bench:tensors`: the CLI prints its result
 * once the tensors are in GPU memory, so its first write to stdout is the moment they are ready.
 * That moment, on the process's own clock (performance.timeOrigin), goes to descriptor 3.
 */
import fs from 'node:fs';
import { formatReadyLine } from './ready-line.js';

const write = process.stdout.write.bind(process.stdout);
let told = false;
process.stdout.write = ((...args: Parameters<typeof process.stdout.write>) => {
  if (!told) {
    told = true;
    const t = performance.now();
    try {
      fs.writeSync(3, formatReadyLine({ sinceStartS: t / 1e3 }));
    } catch {
      // No descriptor 3 (run by hand): nothing to tell.
    }
  }
  return write(...(args as [string]));
}) as typeof process.stdout.write;
