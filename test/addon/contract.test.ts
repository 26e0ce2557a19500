/**
 * The addon against its typed surface: the functions it exports and the fields of the objects it
 * returns are exactly those that src/addon/binding.ts declares (NATIVE_FUNCTIONS, NATIVE_RESULT_FIELDS).
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { NATIVE_FUNCTIONS, NATIVE_RESULT_FIELDS, native } from '../../src/addon/binding.js';
import { columnsOf, planBatch } from '../../src/plan/batch-plan.js';
import { fakeDriverDir, pattern, tmpDir, withEnv } from '../helpers.js';

type FieldMap = Readonly<Record<string, 'required' | 'optional'>>;

/** Every key of `value` is typed, and every required typed key is there. */
function assertFields(what: string, value: unknown, fields: FieldMap): void {
  assert.ok(value !== null && typeof value === 'object', `${what} is an object`);
  const keys = Object.keys(value as object);
  const untyped = keys.filter((k) => !(k in fields));
  assert.deepEqual(untyped, [], `${what}: fields the addon sets that binding.ts does not type`);
  const absent = Object.entries(fields).filter(([k, p]) => p === 'required' && !keys.includes(k)).map(([k]) => k);
  assert.deepEqual(absent, [], `${what}: required fields the addon did not set`);
}

const addon = native();

test('the addon exports exactly the typed functions', () => {
  const exported = Object.keys(addon).sort();
  assert.deepEqual(exported, [...NATIVE_FUNCTIONS].sort());
  for (const name of exported) assert.equal(typeof (addon as unknown as Record<string, unknown>)[name], 'function', name);
});

test('status, device, pointer and IPC objects carry exactly their typed fields', () => {
  const cuda = addon.cudaLoad(path.join(fakeDriverDir, 'libcuda.so.1'));
  assert.equal(cuda.initialized, true, JSON.stringify(cuda));
  assertFields('cudaStatus', cuda, NATIVE_RESULT_FIELDS.cudaStatus);
  assert.equal(cuda.hostRegister, true, 'the fake driver has cuMemHostRegister');
  addon.cufileLoad(path.join(fakeDriverDir, 'libcufile.so.0'));
  const cufile = addon.cufileDriverOpen(0);
  assert.equal(cufile.driverOpen, true, JSON.stringify(cufile));
  assertFields('cufileStatus', cufile, NATIVE_RESULT_FIELDS.cufileStatus);
  assertFields('cufileStatus.props', cufile.props, NATIVE_RESULT_FIELDS.cufileDriverProps);
  const counters = addon.cufileStats();
  assert.ok(Array.isArray(counters) && counters.length > 0, 'level-3 statistics from the fake cuFile');
  for (const c of counters) assertFields('cufileStats[]', c, NATIVE_RESULT_FIELDS.cufileGpuCounters);
  addon.setThreads(2, 0, 0);
  assertFields('poolInfo', addon.poolInfo(), NATIVE_RESULT_FIELDS.poolInfo);
  assertFields('deviceInfo', addon.deviceInfo(0), NATIVE_RESULT_FIELDS.deviceInfo);
  assertFields('memGetInfo', addon.memGetInfo(0), NATIVE_RESULT_FIELDS.memGetInfo);
  assertFields('ipcStatus', addon.ipcStatus(), NATIVE_RESULT_FIELDS.ipcStatus);
  const ptr = addon.deviceAlloc(0, 1 << 16);
  try {
    assertFields('pointerInfo', addon.pointerInfo(ptr), NATIVE_RESULT_FIELDS.pointerInfo);
    assertFields('ipcPointerFacts', addon.ipcPointerFacts(0, ptr), NATIVE_RESULT_FIELDS.ipcPointerFacts);
  } finally {
    addon.deviceFree(0, ptr);
  }
});

test('an operation and its result carry exactly their typed fields', async () => {
  const file = path.join(tmpDir(), 'contract.bin');
  const data = pattern(1 << 16);
  fs.writeFileSync(file, data);
  const fd = fs.openSync(file, 'r');
  try {
    const host = new Uint8Array(data.length);
    const op = addon.submit({
      route: 'posix-host', write: false, fd, directFd: -1, fileOffset: 0, size: data.length, taskSize: 1 << 14,
      maxRunners: 0, writePiece: 0, host, hostOffset: 0, hostStagePiece: 0, directPiece: 0,
    });
    assertFields('submit()', op, NATIVE_RESULT_FIELDS.op);
    const before = Number(process.hrtime.bigint());
    const result = await op.promise;
    const after = Number(process.hrtime.bigint());
    assertFields('operation result', result, NATIVE_RESULT_FIELDS.opResult);
    assertFields('operation result routeShare', result.routeShare, NATIVE_RESULT_FIELDS.workShare);
    assertFields('operation result timeline', result.timeline, NATIVE_RESULT_FIELDS.timeline);
    assert.equal(result.routeShare.tasks, result.tasks, 'no mapped share: the route carried every task');
    // The milestones are in order, on the clock process.hrtime reads (the op was submitted
    // before `before` was taken, so only its end is bounded by `before`).
    const t = result.timeline;
    const order = [t.startNs, t.firstTaskNs, t.lastRunnerStartNs, t.lastTaskEndNs, t.drainedNs, t.settleNs, after];
    for (let i = 1; i < order.length; i++) assert.ok(order[i - 1]! <= order[i]!, `timeline step ${i} in order: ${order.join(', ')}`);
    assert.ok(t.settleNs >= before - 1e9 && t.startNs > after - 60e9, 'timeline on the process.hrtime clock');
    assert.deepEqual(Buffer.from(host), data);
    const registered = addon.cufileRegister(fd);
    assertFields('cufileRegister', registered, NATIVE_RESULT_FIELDS.cufileRegister);
    if (registered.handle !== undefined) addon.cufileDeregister(registered.handle);
  } finally {
    fs.closeSync(fd);
  }
});

test('a batch resolves with exactly its typed fields, its timeline in order', async () => {
  const file = path.join(tmpDir(), 'contract-batch.bin');
  const data = pattern(1 << 16);
  fs.writeFileSync(file, data);
  const fd = fs.openSync(file, 'r');
  try {
    const target = new Uint8Array(1 << 15);
    const plan = planBatch(
      columnsOf([{ file: 0, fileOffset: 0, size: 1 << 14, target: 0, targetOffset: 0, device: -1 }, { file: 0, fileOffset: 1 << 15, size: 1 << 14, target: 0, targetOffset: 1 << 14, device: -1 }]),
      { threads: 2, hostReadMax: 1 << 20, deviceReadMax: () => 1 << 20, hostTargets: 1 },
    );
    const before = Number(process.hrtime.bigint());
    const handle = addon.submitBatch({
      fds: Int32Array.of(fd), reads: plan.reads, pieces: plan.pieces, tasks: plan.tasks, hostTargets: [target.buffer],
      deviceTargets: new BigUint64Array(0), deviceLengths: new Float64Array(0), deviceOrdinals: new Int32Array(0),
      pieceBytes: new Float64Array(plan.pieceRange.length),
    });
    // A batch is a job like any operation: the same handle, and a spec read as strictly.
    assertFields('batch handle', handle, NATIVE_RESULT_FIELDS.op);
    assert.throws(
      () => addon.submitBatch({ fds: Int32Array.of(fd), reads: plan.reads, pieces: plan.pieces, tasks: plan.tasks, hostTargets: [target.buffer], deviceTargets: new BigUint64Array(0), deviceLengths: new Float64Array(0), deviceOrdinals: new Int32Array(0), pieceBytes: new Float64Array(plan.pieceRange.length), ringEntries: 8 }),
      /unknown key in the operation spec: ringEntries/,
    );
    const result = await handle.promise;
    const after = Number(process.hrtime.bigint());
    assertFields('batch result', result, NATIVE_RESULT_FIELDS.batchResult);
    assertFields('batch result timeline', result.timeline, NATIVE_RESULT_FIELDS.timeline);
    const t = result.timeline;
    const order = [before, t.startNs, t.firstTaskNs, t.lastRunnerStartNs, t.lastTaskEndNs, t.drainedNs, t.settleNs, after];
    for (let i = 1; i < order.length; i++) assert.ok(order[i - 1]! <= order[i]!, `timeline step ${i} in order: ${order.join(', ')}`);
    assert.deepEqual(Buffer.from(target), Buffer.concat([data.subarray(0, 1 << 14), data.subarray(1 << 15, 3 << 14)]));
  } finally {
    fs.closeSync(fd);
  }
});

test('a failed operation rejects with an error whose record fields are typed', async () => {
  const file = path.join(tmpDir(), 'contract-ro.bin');
  fs.writeFileSync(file, pattern(4096));
  const fd = fs.openSync(file, 'r');
  try {
    const host = new Uint8Array(4096);
    // A write through a read-only descriptor: pwrite fails with EBADF.
    const op = addon.submit({
      route: 'posix-host', write: true, fd, directFd: -1, fileOffset: 0, size: host.length, taskSize: host.length,
      maxRunners: 0, writePiece: 0, host, hostOffset: 0, hostStagePiece: 0, directPiece: 0,
    });
    const rejection = await op.promise.then(() => undefined, (e: unknown) => e);
    assert.ok(rejection !== undefined, 'the write was refused');
    const record = Object.fromEntries(Object.entries(rejection as object).filter(([k]) => k !== 'stack'));
    assert.equal((record as { code?: string }).code, 'EBADF', JSON.stringify(record));
    assertFields('rejection record', record, NATIVE_RESULT_FIELDS.errorRecord);
  } finally {
    fs.closeSync(fd);
  }
});

test('a staged read with a mapped share reports both shares with their typed fields', async () => {
  const file = path.join(tmpDir(), 'contract-mapped.bin');
  const data = pattern(1 << 20);
  fs.writeFileSync(file, data);
  const fd = fs.openSync(file, 'r');
  addon.devicePrepare(0, 1 << 17, -1, 0, 0);
  const dev = addon.deviceAlloc(0, data.length);
  try {
    const spec = {
      route: 'posix-device', write: false, fd, directFd: -1, fileOffset: 0, size: data.length, taskSize: 1 << 16,
      maxRunners: 0, writePiece: 0, devicePtr: dev, device: 0, stagePiece: 1 << 16, mapped: true, mappedPiece: 1 << 18,
      mappedClaimDivisor: 4, stageScratch: 0,
    } as const;
    // The claim divisor is planned in TypeScript: a mapped spec without a usable one is refused.
    const { mappedClaimDivisor: _, ...noDivisor } = spec;
    const invalid = (e: unknown) => (e as { record?: { code?: string } }).record?.code === 'ERR_PENSTOCK_INVALID_ARGUMENT';
    assert.throws(() => addon.submit(noDivisor as never), invalid);
    assert.throws(() => addon.submit({ ...spec, mappedClaimDivisor: 0 }), invalid);
    // A gathered read streams through scratch and has no mapped share.
    assert.throws(() => addon.submit({ ...spec, gatherCopy: 1 << 20 }), invalid);
    assert.throws(() => addon.submit({ ...spec, mapped: false, gatherCopy: 1 << 20 }), invalid);
    const result = await addon.submit(spec).promise;
    assertFields('operation result', result, NATIVE_RESULT_FIELDS.opResult);
    assertFields('operation result routeShare', result.routeShare, NATIVE_RESULT_FIELDS.workShare);
    assertFields('operation result mapped', result.mapped, NATIVE_RESULT_FIELDS.mappedResult);
    assert.equal(result.routeShare.tasks + result.mapped!.tasks, result.tasks, 'each task in one share');
    assert.equal(result.routeShare.bytes + result.mapped!.bytes, result.bytes, 'each byte in one share');
    const refused = await withEnv({ FAKE_CUDA_HOST_REGISTER_FAIL: '1' }, () => addon.submit(spec).promise);
    assertFields('refused mapped share', refused.mapped, NATIVE_RESULT_FIELDS.mappedResult);
    assertFields('refused mapped share error', refused.mapped!.error, NATIVE_RESULT_FIELDS.errorRecord);
    assert.equal(refused.routeShare.tasks, refused.tasks, 'the route carried every task');
  } finally {
    addon.deviceFree(0, dev);
    fs.closeSync(fd);
  }
});
