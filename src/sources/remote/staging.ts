/**
 * Pinned staging for remote reads into GPU memory: slots of one range each, taken by a request
 * while its body arrives and held until the asynchronous copy to the GPU has finished.
 */
import { PinnedBuffer } from '../../memory/pinned-buffer.js';

/** A pool of pinned slots, grown on demand up to a limit, freed by `free()`. */
export class StagingSlots {
  readonly slotSize: number;
  readonly #limit: number;
  readonly #all: PinnedBuffer[] = [];
  readonly #idle: PinnedBuffer[] = [];
  readonly #waiters: ((b: PinnedBuffer) => void)[] = [];

  constructor(slotSize: number, limit: number) {
    this.slotSize = slotSize;
    this.#limit = limit;
  }

  /** Pinned bytes held now. */
  get pinnedBytes(): number {
    return this.#all.length * this.slotSize;
  }

  /** A free slot; waits for one when all `limit` are in use. */
  take(): Promise<PinnedBuffer> {
    const b = this.#idle.pop();
    if (b) return Promise.resolve(b);
    if (this.#all.length < this.#limit) {
      const fresh = PinnedBuffer.alloc(this.slotSize);
      this.#all.push(fresh);
      return Promise.resolve(fresh);
    }
    return new Promise((resolve) => this.#waiters.push(resolve));
  }

  give(b: PinnedBuffer): void {
    const w = this.#waiters.shift();
    if (w) w(b);
    else this.#idle.push(b);
  }

  /** Frees every slot (all must have been given back). */
  free(): void {
    for (const b of this.#all) b.free();
    this.#all.length = 0;
    this.#idle.length = 0;
  }
}
