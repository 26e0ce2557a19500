/**
 * Packing without every compiler: build-prebuilds skips a target whose compiler is missing, says
 * so and succeeds, so that `npm pack` works for a contributor without the arm64 cross compiler;
 * with PENSTOCK_PREBUILDS=all (as CI sets) the same is an error.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { repoRoot } from '../helpers.js';

describe('build-prebuilds without the cross compiler', () => {
  let bin = '';
  before(() => {
    // A PATH with Node.js and nothing else: no compiler of any target.
    bin = fs.mkdtempSync(path.join(os.tmpdir(), 'penstock-nocc-'));
    fs.symlinkSync(process.execPath, path.join(bin, 'node'));
  });
  after(() => fs.rmSync(bin, { recursive: true, force: true }));
  const run = (env: Record<string, string>) =>
    spawnSync(process.execPath, [path.join(repoRoot, 'scripts/build-prebuilds.mjs'), 'arm64'], {
      cwd: repoRoot, encoding: 'utf8', env: { HOME: process.env.HOME ?? '/', PATH: bin, ...env },
    });

  it('skips the target with a message naming the missing compiler and the package to install, and succeeds', () => {
    const r = run({});
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stderr, /SKIPPED linux-arm64: aarch64-linux-gnu-gcc, aarch64-linux-gnu-g\+\+, aarch64-linux-gnu-strip not on PATH/);
    assert.match(r.stderr, /apt-get install g\+\+-aarch64-linux-gnu/);
    assert.match(r.stderr, /will not carry a linux-arm64 binary/);
  });

  it('fails instead when every binary is required (PENSTOCK_PREBUILDS=all)', () => {
    const r = run({ PENSTOCK_PREBUILDS: 'all' });
    assert.equal(r.status, 1);
    assert.match(r.stderr, /SKIPPED linux-arm64/);
  });
});
