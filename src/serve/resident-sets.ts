/**
 * The daemon's memory: tensor sets resident in GPU memory, each loaded once and exported once,
 * with its leases. Loads of one set are shared (the second asker waits for the first load); a
 * load first makes room under the GPU's budget by evicting the least recently used sets that
 * nobody holds; a set with a lease, or with an asker waiting on it, is never freed.
 */
import crypto from 'node:crypto';
import { deviceInfo } from '../addon/runtime.js';
import { exportTensorSet, type TensorSetExport } from '../ipc/manifest.js';
import type { TensorManifest } from '../ipc/manifest.js';
import { describeCheckpoint, closeCheckpoint } from '../tensors/checkpoint.js';
import { planLoad } from '../tensors/load-plan.js';
import { loadTensors } from '../tensors/loader.js';
import type { TensorSet } from '../tensors/tensor-set.js';
import { usage } from '../vocabulary/errors.js';
import { specKey, type NormalSpec } from './protocol.js';

/** The short id of a key: 12 hexadecimal digits of its sha256. */
function shortId(key: string): string {
  return crypto.createHash('sha256').update(key).digest('hex').slice(0, 12);
}

/** How much GPU memory the daemon may fill on each GPU: bytes, or a share of the GPU's memory. */
export type ServeBudget = { bytes: number } | { percent: number };

/** One set as `list` and `penstock serve-status` show it. */
export interface ResidentSetInfo {
  /** A short id of the set (12 hexadecimal digits of its key's sha256); `evict` takes it. */
  id: string;
  /** The set's key (canonical JSON of its spec); `evict` takes it too. */
  key: string;
  /** What was asked for. */
  spec: NormalSpec;
  /** `loading` until its bytes are in GPU memory, then `resident`. */
  state: 'loading' | 'resident';
  /** Bytes of GPU memory the set holds (or will hold, while loading). */
  bytes: number;
  /** GPU ordinal in the daemon. */
  device: number;
  /** Tensors in the set (0 while loading). */
  tensors: number;
  /** Live leases. */
  leases: number;
  /** Acquires answered from memory (or from a load already under way). */
  hits: number;
  /** Seconds the load took (0 while loading). */
  loadSeconds: number;
  /** Milliseconds since the set was last acquired or released. */
  idleMs: number;
}

interface Entry {
  key: string;
  id: string;
  spec: NormalSpec;
  state: 'loading' | 'resident';
  loading: Promise<void>;
  bytes: number;
  set?: TensorSet;
  exported?: TensorSetExport;
  leases: Set<string>;
  /** Askers between asking and getting their lease: they hold the set like a lease does. */
  waiting: number;
  hits: number;
  loadSeconds: number;
  lastUsed: number;
  usedAt: number;
}

/** A granted lease: the set's manifest to hand to the client. */
export interface Grant {
  /** The lease id (32 hexadecimal digits). */
  lease: string;
  /** The set's key. */
  key: string;
  /** The set's tensor manifest (the slab's IPC handle and every tensor). */
  manifest: TensorManifest;
  /** Whether the set was already resident (or loading) when asked for. */
  hit: boolean;
}

/** Counters over the daemon's life. */
export interface ResidencyCounters {
  /** Acquires answered. */
  acquires: number;
  /** Acquires that found the set resident or already loading. */
  hits: number;
  /** Loads started. */
  loads: number;
  /** Loads that failed. */
  loadFailures: number;
  /** Sets evicted (for room, or asked for). */
  evictions: number;
}

/** The resident sets of one daemon. */
export class ResidentSets {
  readonly #entries = new Map<string, Entry>();
  readonly #leases = new Map<string, Entry>();
  readonly #budget: ServeBudget;
  #clock = 0;
  /** Counters over the daemon's life. */
  readonly counters: ResidencyCounters = { acquires: 0, hits: 0, loads: 0, loadFailures: 0, evictions: 0 };

  readonly #log: (line: string) => void;

  /** Sets under `budget` per GPU; `log` is told of each load, failed load and eviction. */
  constructor(budget: ServeBudget, log: (line: string) => void = () => {}) {
    this.#budget = budget;
    this.#log = log;
  }

  /** The budget of GPU `device`, in bytes. */
  budgetBytes(device: number): number {
    if ('bytes' in this.#budget) return this.#budget.bytes;
    return Math.floor((deviceInfo(device).totalMemory * this.#budget.percent) / 100);
  }

  /**
   * A lease on the set `spec` names: loaded now when it is not resident, joined when its load is
   * under way. Rejects with the load's error when the load fails (the set is then forgotten).
   */
  async acquire(spec: NormalSpec): Promise<Grant> {
    const key = specKey(spec);
    this.counters.acquires++;
    let e = this.#entries.get(key);
    const hit = e !== undefined;
    if (e) {
      this.counters.hits++;
      e.hits++;
    } else {
      e = { key, id: shortId(key), spec, state: 'loading', loading: Promise.resolve(), bytes: 0, leases: new Set(), waiting: 0, hits: 0, loadSeconds: 0, lastUsed: ++this.#clock, usedAt: performance.now() };
      this.#entries.set(key, e);
      e.loading = this.#load(e);
    }
    e.waiting++;
    try {
      await e.loading;
    } finally {
      e.waiting--;
    }
    // From the load's end to here nothing yielded, so the set cannot have been evicted meanwhile.
    const lease = crypto.randomBytes(16).toString('hex');
    e.leases.add(lease);
    this.#leases.set(lease, e);
    this.#touch(e);
    return { lease, key, manifest: e.exported!.manifest as TensorManifest, hit };
  }

  async #load(e: Entry): Promise<void> {
    this.counters.loads++;
    this.devicesUsed.add(e.spec.device);
    const t0 = performance.now();
    try {
      const cp = await describeCheckpoint(e.spec.path);
      try {
        e.bytes = planLoad(cp, { filter: e.spec.filter, rows: e.spec.rows }).slabBytes;
      } finally {
        await closeCheckpoint(cp);
      }
      this.#makeRoom(e);
      const set = await this.#loadMakingRoom(e);
      try {
        e.exported = exportTensorSet(set);
      } catch (err) {
        set.free();
        throw err;
      }
      e.set = set;
      e.state = 'resident';
      e.loadSeconds = (performance.now() - t0) / 1e3;
      this.#log(`loaded ${e.id} (${e.bytes} bytes, ${set.size} tensors, ${e.loadSeconds.toFixed(3)} s): ${e.key}`);
    } catch (err) {
      this.counters.loadFailures++;
      this.#entries.delete(e.key);
      this.#log(`load of ${e.id} failed [${String((err as { code?: unknown }).code)}]: ${e.key}`);
      throw err;
    }
  }

  /**
   * Loads `e`; when the GPU itself runs out of memory (other processes use it too, so the budget
   * alone cannot promise room), evicts the least recently used idle set of the GPU and tries
   * again, until the load fits or nothing idle is left.
   */
  async #loadMakingRoom(e: Entry): Promise<TensorSet> {
    for (;;) {
      try {
        return await loadTensors(e.spec.path, { device: e.spec.device, filter: e.spec.filter, rows: e.spec.rows });
      } catch (err) {
        const victim = (err as { code?: unknown }).code === 'CUDA_ERROR_OUT_OF_MEMORY' ? this.#idle(e.spec.device, e)[0] : undefined;
        if (!victim) throw err;
        this.#log(`GPU ${e.spec.device} is out of memory for ${e.id}: evicting an idle set and trying again`);
        this.#free(victim);
      }
    }
  }

  /** Sets of GPU `device` that nobody holds, least recently used first (never `except`). */
  #idle(device: number, except?: Entry): Entry[] {
    return [...this.#entries.values()]
      .filter((o) => o !== except && o.spec.device === device && o.state === 'resident' && o.leases.size === 0 && o.waiting === 0)
      .sort((a, b) => a.lastUsed - b.lastUsed);
  }

  /** Evicts idle sets of `e`'s GPU, least recently used first, until `e` fits its budget. */
  #makeRoom(e: Entry): void {
    const device = e.spec.device;
    const budget = this.budgetBytes(device);
    if (e.bytes > budget)
      throw usage('ERR_PENSTOCK_SERVE_TOO_LARGE', `The set needs ${e.bytes} bytes of GPU ${device}, more than the daemon's budget of ${budget} bytes there`);
    const others = () => [...this.#entries.values()].filter((o) => o !== e && o.spec.device === device);
    let used = others().reduce((a, o) => a + o.bytes, 0);
    while (used + e.bytes > budget) {
      const idle = this.#idle(device, e)[0];
      if (!idle)
        throw usage('ERR_PENSTOCK_SERVE_BUDGET_FULL', `The set needs ${e.bytes} bytes of GPU ${device}; sets in use (leased or loading) hold ${used} of the budget of ${budget} bytes`);
      this.#free(idle);
      used -= idle.bytes;
    }
  }

  #touch(e: Entry): void {
    e.lastUsed = ++this.#clock;
    e.usedAt = performance.now();
  }

  #free(e: Entry): void {
    this.#entries.delete(e.key);
    e.exported?.release();
    e.set?.free();
    this.counters.evictions++;
    this.#log(`evicted ${e.id} (${e.bytes} bytes)`);
  }

  /** Ends a lease; false when no such lease is live. The set stays resident. */
  release(lease: string): boolean {
    const e = this.#leases.get(lease);
    if (!e) return false;
    this.#leases.delete(lease);
    e.leases.delete(lease);
    this.#touch(e);
    return true;
  }

  /** Evicts the set with this key or id (ERR_PENSTOCK_SERVE_UNKNOWN_SET, or _LEASED while it is held); returns its key. */
  evict(keyOrId: string): string {
    const e = this.#entries.get(keyOrId) ?? [...this.#entries.values()].find((x) => x.id === keyOrId);
    if (!e) throw usage('ERR_PENSTOCK_SERVE_UNKNOWN_SET', 'The daemon holds no set with that key (see list)');
    if (e.state !== 'resident' || e.leases.size > 0 || e.waiting > 0)
      throw usage('ERR_PENSTOCK_SERVE_LEASED', `The set has ${e.leases.size} live lease(s)${e.state === 'loading' ? ' and is still loading' : ''}; it is evicted only when nobody holds it`);
    this.#free(e);
    return e.key;
  }

  /** Evicts every set nobody holds; returns their keys. */
  evictIdle(): string[] {
    const idle = [...this.#entries.values()].filter((e) => e.state === 'resident' && e.leases.size === 0 && e.waiting === 0);
    for (const e of idle) this.#free(e);
    return idle.map((e) => e.key);
  }

  /**
   * Frees every set, leased or not, once loads under way have ended: for a daemon going away,
   * whose clients' mappings end with it.
   */
  async dispose(): Promise<void> {
    await Promise.allSettled([...this.#entries.values()].map((e) => e.loading));
    for (const e of [...this.#entries.values()]) this.#free(e);
    this.#leases.clear();
  }

  /** Every set, most recently used first. */
  list(): ResidentSetInfo[] {
    const now = performance.now();
    return [...this.#entries.values()]
      .sort((a, b) => b.lastUsed - a.lastUsed)
      .map((e) => ({
        id: e.id,
        key: e.key,
        spec: e.spec,
        state: e.state,
        bytes: e.bytes,
        device: e.spec.device,
        tensors: e.set?.size ?? 0,
        leases: e.leases.size,
        hits: e.hits,
        loadSeconds: e.loadSeconds,
        idleMs: Math.round(now - e.usedAt),
      }));
  }

  /** GPUs any set was ever asked for on (the daemon has a CUDA context there). */
  readonly devicesUsed = new Set<number>();

  /** Bytes held (or being loaded) on each GPU. */
  bytesByDevice(): Map<number, number> {
    const out = new Map<number, number>();
    for (const e of this.#entries.values()) out.set(e.spec.device, (out.get(e.spec.device) ?? 0) + e.bytes);
    return out;
  }

  /** Live leases over every set. */
  get leaseCount(): number {
    return this.#leases.size;
  }
}
