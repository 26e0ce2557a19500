/**
 * The one rule for everything penstock releases (device memory, pinned memory, files): it is
 * not released while an operation uses it. The state lives in true private fields, so no
 * property a caller can write changes it.
 */
import { usage } from '../vocabulary/errors.js';

/** A resource's lifetime: uses in flight, and whether it has ended. */
export class Lifetime {
  #uses = 0;
  #ended = false;
  #idle: Array<() => void> = [];
  readonly #what: string;
  readonly #endedCode: string;
  readonly #endedVerb: string;

  /**
   * @param what names the resource in errors, e.g. "This DeviceBuffer".
   * @param endedCode and `endedVerb` say what use after the end raises.
   */
  constructor(what: string, endedCode = 'ERR_PENSTOCK_FREED', endedVerb = 'was freed') {
    this.#what = what;
    this.#endedCode = endedCode;
    this.#endedVerb = endedVerb;
  }

  get ended(): boolean {
    return this.#ended;
  }

  /** Operations in flight that use the resource. */
  get uses(): number {
    return this.#uses;
  }

  /** Throws (ERR_PENSTOCK_FREED unless told otherwise) once the lifetime has ended. */
  assertLive(): void {
    if (this.#ended) throw usage(this.#endedCode, `${this.#what} ${this.#endedVerb}`);
  }

  /** Counts one use until the returned function is called (once; later calls do nothing). */
  enter(): () => void {
    this.assertLive();
    this.#uses++;
    let done = false;
    return () => {
      if (done) return;
      done = true;
      if (--this.#uses === 0) for (const wake of this.#idle.splice(0)) wake();
    };
  }

  /** Runs `fn` as one use: the resource cannot end before the promise it returns settles. */
  async use<T>(fn: () => Promise<T>): Promise<T> {
    const leave = this.enter();
    try {
      return await fn();
    } finally {
      leave();
    }
  }

  /**
   * Ends the lifetime now. Returns false when it had already ended; throws
   * ERR_PENSTOCK_BUFFER_BUSY (and stays live) while a use is in flight.
   */
  end(): boolean {
    if (this.#ended) return false;
    if (this.#uses > 0) throw usage('ERR_PENSTOCK_BUFFER_BUSY', `${this.#what} is in use by an operation in flight`);
    this.#ended = true;
    return true;
  }

  /** Ends the lifetime once no use is in flight (new uses are refused from now on). */
  async endWhenIdle(): Promise<boolean> {
    if (this.#ended) return false;
    this.#ended = true;
    while (this.#uses > 0) await new Promise<void>((resolve) => this.#idle.push(resolve));
    return true;
  }
}
