/**
 * `penstock doctor --probe` on a real GPU: the probe measures a read, cuFile's log (TRACE, in a
 * private file) is quoted beside the prediction, and measurement and prediction agree. The
 * reports are printed for the record. Without a GPU this skips with the reason; `npm run
 * test:gpu` (PENSTOCK_REQUIRE_GPU=1) makes that a failure.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { describe, test } from 'node:test';
import type { DoctorReport } from '../../src/doctor/index.js';
import { makeFile, repoRoot } from '../helpers.js';
import { gpuOrSkip } from './guard.js';

const MAIN = path.join(repoRoot, 'dist/src/cli/main.js');

function doctor(args: string[]) {
  const r = spawnSync(process.execPath, [MAIN, 'doctor', ...args], { encoding: 'utf8', timeout: 300_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('doctor --probe on a GPU', () => {
  const { file } = makeFile(64 << 20);

  for (const shape of [[], ['--offset', '0', '--size', '16MiB'], ['--offset', '4097', '--size', '1MiB']]) {
    test(`the probe agrees with the prediction and quotes cuFile (${shape.join(' ') || 'first 4 MiB'})`, (t) => {
      if (!gpuOrSkip(t)) return;
      const text = doctor(['--probe', ...shape, file]);
      process.stdout.write(text.stdout);
      const r = doctor(['--json', '--probe', ...shape, file]);
      assert.equal(r.code, 0, r.stderr);
      const rep = JSON.parse(r.stdout) as DoctorReport;
      const p = rep.paths[0]!;
      assert.equal(p.probe?.status, 'measured', p.probe?.message);
      assert.notEqual(p.probe?.agrees, false, `measured ${p.probe?.route}, predicted ${p.shape?.route ?? p.prediction.route}: ${p.verdict}`);
      const driverOpen = rep.platform.find((c) => c.id === 'platform.cufile.driver')?.status === 'pass';
      // cuFile saw the file when it carried the read or refused to register it.
      const cufileSawIt = p.probe?.route?.startsWith('cufile') || p.probe?.route === 'gds' || p.probe?.reason?.code === 'CUFILE_HANDLE_REFUSED';
      if (driverOpen && cufileSawIt) assert.ok(p.probe?.cufileLog?.length, "cuFile's log was written and quoted");
      for (const e of p.probe?.cufileEvidence ?? []) assert.notEqual(e.predicted, false, `cuFile names a cause not predicted: ${e.line}`);
    });
  }
});
