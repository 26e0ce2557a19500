/**
 * `node dist/bench/inline-exit-check.js [--runs N] [--helpers H | --public] [--dir DIR]`: whether
 * processes that read into a GPU on the calling thread exit cleanly. Each child reads 1 MiB of a
 * warm random file 300 times, checks the bytes, and exits; the parent counts children that died by
 * a signal or failed. With `--helpers H` the child drives the addon as `inlineDeviceSplit` plans
 * with `maxHelpers` H (through scratch when H ≥ 1); with `--public` it uses `open` and
 * `file.read`, so whatever the default plan does.
 */
import { spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { native } from '../src/addon/binding.js';
import { DeviceBuffer, hasGpu, open } from '../src/index.js';
import { poolSpinnerCount } from '../src/addon/runtime.js';
import { prepareDevice } from '../src/addon/gpu-preparation.js';
import { inlineDeviceSplit } from '../src/plan/transfer-plan.js';

const { values } = parseArgs({ options: { runs: { type: 'string', default: '40' }, helpers: { type: 'string', default: '3' }, dir: { type: 'string', default: os.tmpdir() }, child: { type: 'string' }, public: { type: 'boolean', default: false } } });
const SIZE = 1 << 20;

if (values.child) {
  // One child: 300 helped reads of the file, the bytes checked every 50.
  const want = fs.readFileSync(values.child);
  const dev = DeviceBuffer.alloc(SIZE);
  prepareDevice(dev.device);
  const check = async (i: number, got: number): Promise<void> => {
    if (got !== SIZE) throw new Error(`read ${i} gave ${got}`);
    if (i % 50 === 0 && !(await dev.toBuffer()).equals(want)) throw new Error(`read ${i}: bytes differ`);
  };
  if (values.public) {
    const file = await open(values.child, 'r');
    for (let i = 0; i < 300; i++) await check(i, await file.read(dev, { fileOffset: 0 }));
    await file.close();
  } else {
    const { piece, helpers, scratch } = inlineDeviceSplit(SIZE, poolSpinnerCount(), Number(values.helpers));
    const fd = fs.openSync(values.child, 'r');
    const report = new Uint32Array(1);
    for (let i = 0; i < 300; i++) await check(i, native().readCachedToDevice(fd, dev.device, dev.ptr, SIZE, 0, piece, helpers, scratch, report));
    fs.closeSync(fd);
  }
  dev.free();
} else {
  if (!hasGpu()) {
    console.log('no GPU: nothing to check');
    process.exit(0);
  }
  const file = path.join(values.dir!, `penstock-exit-check-${process.pid}.bin`);
  fs.writeFileSync(file, crypto.randomBytes(SIZE));
  const runs = Number(values.runs);
  const failed: string[] = [];
  for (let i = 0; i < runs; i++) {
    const r = spawnSync(process.execPath, [fileURLToPath(import.meta.url), '--child', file, ...(values.public ? ['--public'] : ['--helpers', values.helpers!])], { encoding: 'utf8', timeout: 60_000 });
    if (r.status !== 0) failed.push(`run ${i + 1}: ${r.signal ?? `exit ${r.status}`}${r.stderr ? ` (${r.stderr.trim().split('\n').pop()})` : ''}`);
  }
  fs.rmSync(file, { force: true });
  console.log(`${values.public ? 'public file.read' : `helpers ${values.helpers}`}: ${failed.length} of ${runs} children failed`);
  for (const f of failed) console.log(`  ${f}`);
  process.exit(failed.length ? 1 : 0);
}
