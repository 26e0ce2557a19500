/** The staging plan, table-driven and without the addon: bounce buffer sizes and staging sized to the work. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AUTO_BOUNCE_MAX, AUTO_BOUNCE_MIN, bounceBufferBytes, stagingFor } from '../../src/plan/staging-plan.js';
import { GATHER_MIN, GATHER_STAGE } from '../../src/plan/transfer-plan.js';

const MiB = 1024 * 1024;

test("bounce buffers: the setting as given, 'auto' shared over workers and GPUs within its bounds", () => {
  const rows: [Parameters<typeof bounceBufferBytes>[0], number, number][] = [
    [{ bounceBufferSize: 4 * MiB, threads: 16 }, 8, 4 * MiB],
    [{ bounceBufferSize: 'auto', threads: 16 }, 1, 8 * MiB],
    [{ bounceBufferSize: 'auto', threads: 16 }, 8, AUTO_BOUNCE_MIN],
    [{ bounceBufferSize: 'auto', threads: 32 }, 2, 4 * MiB],
    [{ bounceBufferSize: 'auto', threads: 24 }, 1, 8 * MiB],
    [{ bounceBufferSize: 'auto', threads: 48 }, 1, 4 * MiB],
    [{ bounceBufferSize: 'auto', threads: 16 }, 0, AUTO_BOUNCE_MAX],
  ];
  for (const [s, devices, want] of rows) assert.equal(bounceBufferBytes(s, devices), want, `${JSON.stringify(s)} on ${devices} GPU(s)`);
});

test('staging sized to the work: a small load pins little, an unknown one all', () => {
  const half = 8 * MiB;
  const rows: [number | undefined, { slots: number; gather: number }][] = [
    [undefined, { slots: 16, gather: GATHER_STAGE }],
    [0, { slots: 16, gather: GATHER_STAGE }],
    [Number.NaN, { slots: 16, gather: GATHER_STAGE }],
    [4096, { slots: 1, gather: 0 }],
    [GATHER_MIN - 1, { slots: 1, gather: 0 }],
    [10 * MiB, { slots: 2, gather: 10 * MiB }],
    [10 * MiB + 1, { slots: 2, gather: 11 * MiB }],
    [100 * MiB, { slots: 13, gather: GATHER_STAGE }],
    [7e9, { slots: 16, gather: GATHER_STAGE }],
  ];
  for (const [work, want] of rows) assert.deepEqual(stagingFor(work, 16, half), want, `work ${work}`);
});
