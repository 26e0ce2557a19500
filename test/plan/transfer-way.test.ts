/**
 * The transfer plan, table-driven and without the addon or a file: which way a read or write
 * moves for given facts, the fallbacks it names, and which facts it asks for (a fact that costs a
 * system call is asked only where a decision needs it).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { defaults, type Settings } from '../../src/settings/config.js';
import { GATHER_COPY, GATHER_TASK, MAPPED_CLAIM_DIVISOR, MAPPED_PIECE, coldStripe, deviceReadTaskSize, inlineDeviceSplit, planDeviceRead } from '../../src/plan/transfer-plan.js';
import { planTransfer, usesDirect, type FileRouteState, type KeptPlan, type TransferFacts, type TransferRequest, type TransferWay } from '../../src/plan/transfer-way.js';
import { directIoUnavailable, keptPagesNotCached, keptPagesStale, type Reason } from '../../src/vocabulary/reasons.js';
import type { CompatMode } from '../../src/settings/table.js';
import type { StorageFacts } from '../../src/system/block-device.js';

const KiB = 1024;
const MiB = 1024 * KiB;
/** Fixed settings, whatever the machine: sixteen threads, the defaults otherwise. */
const SETTINGS: Settings = { ...defaults(), threads: 16 };
const NVME: StorageFacts = { device: 'nvme0n1', rotational: false, nvme: true };
const VIRTIO: StorageFacts = { device: 'vda', rotational: true, nvme: false };

/** The facts of a row: what differs from a warm file on a machine where nothing else runs. */
interface Given {
  settings?: Partial<Settings>;
  compatMode?: CompatMode;
  /** The file's route is cuFile; an Error: deciding it throws (compatMode 'off'). */
  cufile?: boolean | Error;
  hostRegister?: boolean;
  kept?: KeptPlan | Reason;
  inflight?: number;
  spinners?: number;
  file?: Partial<FileRouteState>;
  residency?: number;
  fileSize?: number;
  storage?: StorageFacts;
}

/** Facts from `g`, and the names of the callbacks asked, in order. */
function factsOf(g: Given): { facts: TransferFacts; asked: string[] } {
  const asked: string[] = [];
  const ask = <T>(name: string, value: () => T) => () => {
    asked.push(name);
    return value();
  };
  const facts: TransferFacts = {
    settings: { ...SETTINGS, ...g.settings },
    compatMode: g.compatMode ?? 'auto',
    cufileRoute: ask('cufileRoute', () => {
      if (g.cufile instanceof Error) throw g.cufile;
      return g.cufile ?? false;
    }),
    hostRegister: ask('hostRegister', () => g.hostRegister ?? true),
    keptOffer: ask('keptOffer', () => g.kept),
    inflight: ask('inflight', () => g.inflight ?? 0),
    poolSpinners: ask('poolSpinners', () => g.spinners ?? 4),
    file: { inlineUnsupported: false, mappedRefused: false, directIo: 'untried', ...g.file },
    read: {
      residency: ask('residency', () => g.residency ?? 1),
      fileSize: ask('fileSize', () => g.fileSize ?? 1024 * MiB),
      storage: ask('storage', () => g.storage ?? NVME),
    },
  };
  return { facts, asked };
}

const read = (memory: 'device' | 'host', size: number, more: Partial<TransferRequest> = {}): TransferRequest => ({ op: 'read', memory, size, fileOffset: 0, ...more });
const write = (memory: 'device' | 'host', size: number): TransferRequest => ({ op: 'write', memory, size, fileOffset: 0 });
const staged = (size: number, more: Partial<Settings> = {}) => planDeviceRead({ ...SETTINGS, ...more }, size, false, false);
const bounce = (size: number, direct = false) => ({ kind: 'staged', variant: 'bounce', direct, split: { taskSize: deviceReadTaskSize(SETTINGS, size), gatherCopy: 0 } }) as const;

/** A row: what is asked, the facts, the way and fallback codes wanted, and (where given) exactly the facts asked for. */
type Row = [label: string, request: TransferRequest, given: Given, way: TransferWay, fallbacks: string[], asked?: string[]];

const KEEP: KeptPlan = { id: 7, keep: true, issue: false };
const REUSE: KeptPlan = { id: 7, keep: false, issue: true };

const HOST_ROWS: Row[] = [
  ['a small cached read: the calling thread, nothing sampled', read('host', 4 * KiB), {}, { kind: 'inline-host' }, [], []],
  ['the inline limit itself', read('host', SETTINGS.inlineReadMax), {}, { kind: 'inline-host' }, [], []],
  ['one byte past it: the pool', read('host', SETTINGS.inlineReadMax + 1), {}, { kind: 'pool-host', direct: false }, [], []],
  ['inlineReadMax 0: never inline', read('host', 4 * KiB), { settings: { inlineReadMax: 0 } }, { kind: 'pool-host', direct: false }, []],
  ['a file system without non-blocking reads', read('host', 4 * KiB), { file: { inlineUnsupported: true } }, { kind: 'pool-host', direct: false }, []],
  ['handed back by the calling thread', read('host', 4 * KiB, { handedBack: { inline: true } }), {}, { kind: 'pool-host', direct: false }, []],
  ['directIoRead true: O_DIRECT, never inline', read('host', 4 * KiB), { settings: { directIoRead: true } }, { kind: 'pool-host', direct: true }, []],
  ['a warm large read: buffered, residency sampled once', read('host', 128 * MiB), {}, { kind: 'pool-host', direct: false }, [], ['residency']],
  ['a cold large read on NVMe: O_DIRECT', read('host', 128 * MiB), { residency: 0.1 }, { kind: 'pool-host', direct: true, cold: { device: 'nvme0n1', direct: true } }, [], ['residency', 'storage']],
  ['a cold large read on a virtio disk: readahead, a stripe per worker', read('host', 128 * MiB), { residency: 0.1, storage: VIRTIO }, { kind: 'pool-host', direct: false, stripe: coldStripe(SETTINGS, 128 * MiB), cold: { device: 'vda', direct: false } }, []],
  ['O_DIRECT planned, the descriptor refused: buffered, and why', read('host', 128 * MiB), { residency: 0, file: { directIo: directIoUnavailable('EINVAL') } }, { kind: 'pool-host', direct: false, cold: { device: 'nvme0n1', direct: true } }, ['DIRECT_IO_REFUSED']],
  ['a write: never inline, buffered by default', write('host', 4 * KiB), {}, { kind: 'pool-host', direct: false }, [], []],
  ['a write under directIoWrite', write('host', 4 * KiB), { settings: { directIoWrite: true } }, { kind: 'pool-host', direct: true }, []],
];

const DEVICE_ROWS: Row[] = [
  ['cuFile from gdsThreshold up, nothing else asked', read('device', 64 * KiB), { cufile: true }, { kind: 'cufile' }, [], ['cufileRoute']],
  ['cuFile writes too', write('device', 64 * KiB), { cufile: true }, { kind: 'cufile' }, [], ['cufileRoute']],
  ['below gdsThreshold cuFile is not asked', read('device', 4 * KiB), { cufile: true }, { kind: 'inline-device', split: inlineDeviceSplit(4 * KiB, 4) }, [], ['hostRegister', 'keptOffer', 'inflight', 'poolSpinners']],
  ["compatMode 'off': cuFile at every size", read('device', 4 * KiB), { compatMode: 'off', cufile: true }, { kind: 'cufile' }, []],
  ['a file staged (cuFile refused): no fallback of the operation', read('device', 4 * MiB), { cufile: false }, { kind: 'staged', variant: 'gathered', direct: false, split: { taskSize: GATHER_TASK, gatherCopy: GATHER_COPY } }, []],
  ['kept pages to register: through the pool', read('device', 2 * MiB), { kept: KEEP }, { kind: 'kept', kept: KEEP, onCallingThread: false }, []],
  ['kept pages reused, small, nothing in flight: the calling thread', read('device', MiB), { kept: REUSE }, { kind: 'kept', kept: REUSE, onCallingThread: true }, []],
  ['kept pages reused while a read is in flight: the pool', read('device', MiB), { kept: REUSE, inflight: 1 }, { kind: 'kept', kept: REUSE, onCallingThread: false }, []],
  ['kept pages reused above inlineReadMax: the pool', read('device', 2 * MiB), { kept: REUSE }, { kind: 'kept', kept: REUSE, onCallingThread: false }, []],
  ['the inline stream was busy: the pool', read('device', MiB, { handedBack: { keptStreamBusy: true } }), { kept: REUSE }, { kind: 'kept', kept: REUSE, onCallingThread: false }, []],
  ['kept pages not kept (not cached): the usual way, and why', read('device', 4 * MiB), { kept: keptPagesNotCached() }, { kind: 'staged', variant: 'gathered', direct: false, split: staged(4 * MiB) }, ['KEPT_PAGES_NOT_CACHED']],
  ['kept pages refused by the addon: not offered again, and why', read('device', 64 * MiB, { handedBack: { kept: keptPagesStale() } }), { kept: REUSE }, { kind: 'staged', variant: 'gathered', direct: false, split: staged(64 * MiB) }, ['KEPT_PAGES_STALE']],
  ['no kept pages under directIoRead true', read('device', 2 * MiB), { kept: REUSE, settings: { directIoRead: true } }, bounce(2 * MiB, true), [], ['cufileRoute', 'hostRegister']],
  ['no kept pages without cuMemHostRegister', read('device', 2 * MiB), { kept: REUSE, hostRegister: false }, { kind: 'staged', variant: 'gathered', direct: false, split: staged(2 * MiB) }, []],
  ['a small read, nothing in flight: the calling thread, helped', read('device', 512 * KiB), {}, { kind: 'inline-device', split: inlineDeviceSplit(512 * KiB, 4) }, []],
  ['no pool worker watching: the calling thread alone', read('device', 512 * KiB), { spinners: 0 }, { kind: 'inline-device', split: inlineDeviceSplit(512 * KiB, 0) }, []],
  ['a small read while another is in flight: the pool', read('device', 512 * KiB), { inflight: 2 }, bounce(512 * KiB), []],
  ['handed back by the calling thread: the pool', read('device', 512 * KiB, { handedBack: { inline: true } }), {}, bounce(512 * KiB), []],
  ['mid-size: gathered', read('device', 16 * MiB), {}, { kind: 'staged', variant: 'gathered', direct: false, split: staged(16 * MiB) }, []],
  ['large and warm, two threads: the mapped share beside staging', read('device', 256 * MiB), { settings: { threads: 2 } }, {
    kind: 'staged', variant: 'mapped', direct: false, split: planDeviceRead({ ...SETTINGS, threads: 2 }, 256 * MiB, false, true), mapped: { piece: MAPPED_PIECE, claimDivisor: MAPPED_CLAIM_DIVISOR },
  }, []],
  ['the mapped route refused for the file before: staging alone', read('device', 256 * MiB), { settings: { threads: 2 }, file: { mappedRefused: true } }, {
    kind: 'staged', variant: 'bounce', direct: false, split: planDeviceRead({ ...SETTINGS, threads: 2 }, 256 * MiB, false, false),
  }, []],
  ['large and warm, many threads: staging alone', read('device', 256 * MiB), {}, bounce(256 * MiB), []],
  ['large and cold on a virtio disk: a stripe per worker through the page cache', read('device', 256 * MiB), { residency: 0, storage: VIRTIO }, {
    kind: 'staged', variant: 'striped', direct: false, split: { taskSize: coldStripe(SETTINGS, 256 * MiB), gatherCopy: 0 }, cold: { device: 'vda', direct: false },
  }, []],
  ['large and cold on NVMe: O_DIRECT through the bounce halves', read('device', 256 * MiB), { residency: 0 }, { ...bounce(256 * MiB, true), cold: { device: 'nvme0n1', direct: true } }, []],
  ['O_DIRECT refused for the file: buffered, gathered where it fits, and why', read('device', 4 * MiB), { settings: { directIoRead: true }, file: { directIo: directIoUnavailable('EINVAL') } }, {
    kind: 'staged', variant: 'gathered', direct: false, split: staged(4 * MiB),
  }, ['DIRECT_IO_REFUSED']],
  ['a write: staged, split by its spec', write('device', 8 * MiB), {}, { kind: 'staged', variant: 'bounce', direct: false }, [], ['cufileRoute']],
  ['an O_DIRECT write whose descriptor was refused', write('device', 8 * MiB), { settings: { directIoWrite: true }, file: { directIo: directIoUnavailable('EINVAL') } }, { kind: 'staged', variant: 'bounce', direct: false }, ['DIRECT_IO_REFUSED']],
];

function check(rows: Row[]): void {
  for (const [label, request, given, way, fallbacks, asked] of rows) {
    const { facts, asked: seen } = factsOf(given);
    const plan = planTransfer(request, facts);
    assert.deepEqual(plan.way, way, label);
    assert.deepEqual(plan.fallbacks.map((r) => r.code), fallbacks, `${label}: fallbacks`);
    for (const r of plan.fallbacks) assert.ok(r.message.length > 20, `${label}: ${r.code} has a sentence`);
    if (asked) assert.deepEqual(seen, asked, `${label}: facts asked`);
  }
}

describe('the transfer plan', () => {
  test('host memory: the calling thread for small cached reads, else the pool, O_DIRECT as planned', () => check(HOST_ROWS));

  test('device memory: cuFile, kept pages, the calling thread, then staging (bounce, gathered, mapped)', () => check(DEVICE_ROWS));

  test("deciding the route may throw (compatMode 'off'): the plan does not swallow it", () => {
    const refused = Object.assign(new Error('cuFile required'), { code: 'ERR_PENSTOCK_CUFILE_REQUIRED' });
    assert.throws(() => planTransfer(read('device', 4 * KiB), factsOf({ compatMode: 'off', cufile: refused }).facts), { code: 'ERR_PENSTOCK_CUFILE_REQUIRED' });
  });

  test('planning again after the calling thread handed a read back: the next way, with the fallbacks met before', () => {
    const { facts } = factsOf({ kept: keptPagesNotCached() });
    const first = planTransfer(read('device', MiB), facts);
    assert.equal(first.way.kind, 'inline-device');
    const again = planTransfer(read('device', MiB, { handedBack: { inline: true } }), facts);
    assert.deepEqual([again.way.kind, again.fallbacks.map((r) => r.code)], ['staged', ['KEPT_PAGES_NOT_CACHED']]);
  });

  test('which ways use the O_DIRECT descriptor', () => {
    const ways: [TransferWay, boolean][] = [
      [{ kind: 'pool-host', direct: true }, true],
      [{ kind: 'pool-host', direct: false }, false],
      [bounce(MiB, true), true],
      [bounce(MiB), false],
      [{ kind: 'cufile' }, false],
      [{ kind: 'inline-host' }, false],
    ];
    for (const [way, want] of ways) assert.equal(usesDirect(way), want, JSON.stringify(way));
  });
});
