/**
 * The one rule of the GPU tests: without a usable GPU they skip with the reason, and
 * `npm run test:gpu` (PENSTOCK_REQUIRE_GPU=1) makes that a failure instead.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import type { TestContext } from 'node:test';
import { hasGpu } from '../../src/index.js';
import { runtimeInfo } from '../../src/doctor.js';

const required = process.env.PENSTOCK_REQUIRE_GPU === '1';
const why = hasGpu() ? undefined : `no usable GPU (${runtimeInfo().cuda.error ?? runtimeInfo().cuda.initError?.code ?? 'no device'})`;

/** True when the test can use the GPU; otherwise skips `t` (or fails it where a GPU is required). */
export function gpuOrSkip(t: TestContext): boolean {
  if (!why) return true;
  if (required) assert.fail(`GPU required but ${why}`);
  t.skip(why);
  return false;
}

/** The Python interpreter the GPU tests run (PENSTOCK_PYTHON, else python3). */
export const python = process.env.PENSTOCK_PYTHON ?? 'python3';

/** Why `modules` cannot be imported by {@link python} under `env`, or undefined when they can. */
export function pythonMissing(modules: string[], env: NodeJS.ProcessEnv = process.env): string | undefined {
  const r = spawnSync(python, ['-c', modules.map((m) => `import ${m}`).join('; ')], { encoding: 'utf8', env });
  if (r.error) return `${python} cannot be run (${r.error.message})`;
  if (r.status !== 0) return `${python} lacks ${modules.join(', ')}: ${r.stderr.trim().split('\n').at(-1)}`;
  return undefined;
}

/**
 * True when the test can use the GPU and Python with `modules`; otherwise skips `t` (or fails it
 * where PENSTOCK_REQUIRE_PYTHON=1 asks for Python).
 */
export function pythonOrSkip(t: TestContext, modules: string[], env: NodeJS.ProcessEnv = process.env): boolean {
  if (!gpuOrSkip(t)) return false;
  const missing = pythonMissing(modules, env);
  if (!missing) return true;
  if (process.env.PENSTOCK_REQUIRE_PYTHON === '1') assert.fail(missing);
  t.skip(missing);
  return false;
}
