/**
 * The one runner of native jobs (src/engine/runner.ts), with stand-in jobs: the first failure
 * cancels the others, an abort cancels them all, the run settles only once every job has, and
 * records are counted once, failed or not.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { JobRun, runRecorded, settleInline } from '../../src/engine/runner.js';
import { AbortError } from '../../src/vocabulary/errors.js';
import type { NativeOp } from '../../src/addon/binding.js';
import { recordOf, type OpRecord } from '../../src/engine/op-record.js';

/** A job settled by hand, that counts its cancels (a cancelled stand-in rejects as the addon's jobs do). */
function standIn<R>(): { op: NativeOp<R>; resolve: (r: R) => void; reject: (e: unknown) => void; cancels: () => number } {
  let resolve!: (r: R) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<R>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  let cancels = 0;
  const op: NativeOp<R> = {
    promise,
    id: 1,
    cancel() {
      cancels++;
      reject({ kind: 'abort', code: 'ABORT_ERR', message: 'The operation was aborted' });
    },
  };
  return { op, resolve, reject, cancels: () => cancels };
}

const failure = { kind: 'os', code: 'EIO', message: 'input/output error', errno: 5, syscall: 'pread' };

describe('the runner', () => {
  test('the first failure cancels the other jobs and is the run\'s error, once every job settled', async () => {
    const a = standIn<number>();
    const b = standIn<number>();
    const run = new JobRun<number>(undefined, '/some/file');
    assert.equal(run.submit(() => a.op), true);
    assert.equal(run.submit(() => b.op), true);
    let settled = false;
    const done = run.settled().then((out) => {
      settled = true;
      return out;
    });
    a.reject(failure);
    await new Promise((r) => setImmediate(r));
    assert.ok(b.cancels() >= 1, 'the other job was cancelled');
    const out = await done;
    assert.equal(settled, true);
    assert.equal(out.ok, false);
    assert.equal((out as { error: Error & { code?: string } }).error.code, 'EIO');
  });

  test('a refusal at submit is the error; jobs already started are cancelled', async () => {
    const a = standIn<number>();
    const run = new JobRun<number>(undefined);
    assert.equal(run.submit(() => a.op), true);
    assert.equal(run.submit(() => {
      throw { kind: 'misuse', code: 'ERR_PENSTOCK_INVALID_ARGUMENT', message: 'bad spec' };
    }), false);
    assert.ok(a.cancels() >= 1, 'the job started was cancelled');
    const out = await run.settled();
    assert.equal((out as { error: Error & { code?: string } }).error.code, 'ERR_PENSTOCK_INVALID_ARGUMENT');
  });

  test('an abort cancels every job, and the error carries the signal\'s reason', async () => {
    const a = standIn<number>();
    const b = standIn<number>();
    const ac = new AbortController();
    const run = new JobRun<number>(ac.signal);
    run.submit(() => a.op);
    run.submit(() => b.op);
    const reason = new Error('stop');
    ac.abort(reason);
    const out = await run.settled();
    assert.ok(a.cancels() >= 1 && b.cancels() >= 1, 'both jobs were cancelled');
    const e = (out as { error: Error }).error;
    assert.ok(e instanceof AbortError);
    assert.equal(e.cause, reason);
  });

  test('results come in submission order', async () => {
    const a = standIn<number>();
    const b = standIn<number>();
    const run = new JobRun<number>(undefined);
    run.submit(() => a.op);
    run.submit(() => b.op);
    b.resolve(2);
    a.resolve(1);
    assert.deepEqual(await run.settled(), { ok: true, results: [1, 2] });
  });

  test('runRecorded counts a record or a failure, and nothing for a refusal', async () => {
    const counted: string[] = [];
    const tally = {
      done: (rec: OpRecord) => {
        counted.push(`done ${rec.bytes}`);
        return rec;
      },
      failed: () => counted.push('failed'),
    };
    const record = (r: number) => recordOf({ kind: 'pool-host' }, 'posix-host', undefined, { bytes: r, tasks: 1, peakTasks: 1, routeShare: { tasks: 1, bytes: r, busyNs: 0, ioNs: 0, waitNs: 0 } }, false, []);
    const ok = standIn<number>();
    ok.resolve(7);
    assert.equal((await runRecorded(() => ok.op, undefined, undefined, record, tally)).bytes, 7);
    const bad = standIn<number>();
    bad.reject(failure);
    await assert.rejects(runRecorded(() => bad.op, undefined, '/f', record, tally), { code: 'EIO' });
    await assert.rejects(runRecorded(() => {
      throw { kind: 'misuse', code: 'ERR_PENSTOCK_INVALID_ARGUMENT', message: 'bad spec' };
    }, undefined, undefined, record, tally), { code: 'ERR_PENSTOCK_INVALID_ARGUMENT' });
    assert.deepEqual(counted, ['done 7', 'failed']);
  });

  test('an inline read is counted at once and reports its progress after the call returns', async () => {
    const seen: string[] = [];
    const rec = recordOf({ kind: 'inline-host' }, 'posix-host', undefined, { bytes: 9, tasks: 1, peakTasks: 1, routeShare: { tasks: 1, bytes: 9, busyNs: 0, ioNs: 0, waitNs: 0 } }, false, []);
    const p = settleInline(rec, (r) => {
      seen.push('counted');
      return r;
    }, (n) => seen.push(`progress ${n}`));
    seen.push('returned');
    assert.equal(await p, rec);
    assert.deepEqual(seen, ['counted', 'returned', 'progress 9']);
  });
});
