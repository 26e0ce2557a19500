/**
 * The one rule of the GPU tests: without a usable GPU they skip with the reason, and
 * `npm run test:gpu` (PENSTOCK_REQUIRE_GPU=1) makes that a failure instead.
 */
import assert from 'node:assert/strict';
import type { TestContext } from 'node:test';
import { hasGpu, runtimeInfo } from '../../src/index.js';

const required = process.env.PENSTOCK_REQUIRE_GPU === '1';
const why = hasGpu() ? undefined : `no usable GPU (${runtimeInfo().cuda.error ?? runtimeInfo().cuda.initError?.code ?? 'no device'})`;

/** True when the test can use the GPU; otherwise skips `t` (or fails it where a GPU is required). */
export function gpuOrSkip(t: TestContext): boolean {
  if (!why) return true;
  if (required) assert.fail(`GPU required but ${why}`);
  t.skip(why);
  return false;
}
