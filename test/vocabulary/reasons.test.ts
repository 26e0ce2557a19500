/**
 * One vocabulary: the runtime's recorded reasons and the doctor's predicted ones are the same
 * codes with the same sentences, and every route has a meaning and a rank.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { repoRoot } from '../helpers.js';
import { diagnose, type PlatformFacts } from '../../src/doctor/index.js';
import { REASON_CODES, ROUTE_MEANINGS, ROUTE_RANK, compatModeOn, cufileUnavailableReason, parseBooleanWord } from '../../src/vocabulary/reasons.js';
import { FileRouting } from '../../src/engine/routing.js';
import { ROUTES } from '../../src/engine/stats.js';

const GDS = path.join(repoRoot, 'test/fixtures/doctor/gds-nvme');
const FACTS: PlatformFacts = {
  cuda: { loaded: true, path: 'libcuda.so.1', initialized: true, driverVersion: 12080, deviceCount: 1 },
  gpus: [{ ordinal: 0, name: 'NVIDIA H100', totalMemory: 80 * 2 ** 30, pciBusId: '0000:83:00.0', computeCapability: [9, 0] }],
  cufile: { loaded: false, path: 'libcufile.so.0', driverOpen: false, statsLevel: 0, error: 'libcufile.so.0: cannot open shared object file' },
};

describe('routes and reasons', () => {
  test('every route has a meaning and a rank, and nothing else has', () => {
    assert.deepEqual(Object.keys(ROUTE_MEANINGS).sort(), [...ROUTES].sort());
    assert.deepEqual(Object.keys(ROUTE_RANK).sort(), [...ROUTES].sort());
    assert.ok(ROUTE_RANK.gds > ROUTE_RANK['cufile-compat'] && ROUTE_RANK['mapped-device'] > ROUTE_RANK['posix-device']);
  });

  test("compat mode on: one code, one sentence, in the runtime's record and the doctor's prediction", async () => {
    const recorded = new FileRouting('on').route.reason!;
    assert.deepEqual(recorded, compatModeOn());
    const r = await diagnose(['/data/model.bin'], { root: GDS, facts: { ...FACTS, cufile: { ...FACTS.cufile, loaded: true, driverOpen: true } }, env: { PENSTOCK_COMPAT_MODE: 'on' } });
    const predicted = r.paths[0]!.prediction.blockers.find((b) => b.code === recorded.code)!;
    assert.equal(predicted.message, recorded.message);
  });

  test('cuFile not loaded: the doctor says what the runtime records', async () => {
    const r = await diagnose(['/data/model.bin'], { root: GDS, facts: FACTS, env: {} });
    const predicted = r.paths[0]!.prediction.blockers.find((b) => b.code === 'CUFILE_NOT_LOADED')!;
    assert.equal(predicted.message, cufileUnavailableReason(FACTS.cufile, undefined)!.message);
  });

  test('boolean words', () => {
    for (const w of ['1', 'true', 'YES', 'on']) assert.equal(parseBooleanWord(w), true);
    for (const w of ['0', 'False', 'no', 'OFF']) assert.equal(parseBooleanWord(w), false);
    assert.equal(parseBooleanWord('maybe'), undefined);
  });

  test('every fallback reason is written in the vocabulary alone: no other source file makes a code of its own', () => {
    const src = path.join(repoRoot, 'src');
    const files = (fs.readdirSync(src, { recursive: true }) as string[]).filter((f) => f.endsWith('.ts'));
    const offenders: string[] = [];
    for (const f of files) {
      // The doctor compares codes (it predicts the same causes); the vocabulary defines them.
      if (f.startsWith(`doctor${path.sep}`) || f === path.join('vocabulary', 'reasons.ts')) continue;
      const text = fs.readFileSync(path.join(src, f), 'utf8');
      for (const m of text.matchAll(/\bcode:\s*'([A-Z][A-Z0-9_]*)'\s*,\s*message:/g)) offenders.push(`${f}: ${m[1]}`);
      for (const code of Object.keys(REASON_CODES)) if (text.includes(`'${code}'`)) offenders.push(`${f}: ${code}`);
    }
    assert.deepEqual(offenders, []);
  });
});
