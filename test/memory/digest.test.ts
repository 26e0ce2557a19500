/** Digests of memory of any size: fed to the hash in pieces, since one update refuses 2 GiB or more. */
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { describe, it } from 'node:test';
import { DIGEST_PIECE, digestHex, updateInPieces } from '../../src/memory/digest.js';
import { RangeServer } from '../remote-range-server.js';
import { pattern } from '../helpers.js';

/** A hash that, like Node's, refuses an update longer than its limit; it records each piece. */
class LimitedHash {
  readonly pieces: number[] = [];
  readonly #inner = crypto.createHash('sha256');
  constructor(readonly limit: number) {}
  update(data: Uint8Array): this {
    if (data.length > this.limit) throw new RangeError('data is too long');
    this.pieces.push(data.length);
    this.#inner.update(data);
    return this;
  }
  digest(): string {
    return this.#inner.digest('hex');
  }
}

describe('digests in pieces', () => {
  const data = pattern(100_003, 5);
  const whole = crypto.createHash('sha256').update(data).digest('hex');

  it('feeds a hash that refuses long updates in pieces it takes, with the same digest', () => {
    // Node's limit (2^31 - 1 bytes) at a scale a test can afford: the whole buffer is refused…
    assert.throws(() => new LimitedHash(4096).update(data), RangeError);
    // …and the same bytes in pieces of at most the limit are not.
    const h = updateInPieces(new LimitedHash(4096), data, 4096);
    assert.equal(h.digest(), whole);
    assert.equal(h.pieces.length, Math.ceil(data.length / 4096));
    assert.ok(h.pieces.every((n) => n <= 4096));
    assert.equal(h.pieces.reduce((a, b) => a + b, 0), data.length);
  });

  it('gives the one-shot digest for any piece size, views at an offset and empty input', () => {
    for (const piece of [1, 7, 65536, data.length, DIGEST_PIECE]) assert.equal(digestHex('sha256', data, piece), whole, String(piece));
    const view = new DataView(data.buffer, data.byteOffset + 3, 1000);
    assert.equal(digestHex('md5', view, 64), crypto.createHash('md5').update(data.subarray(3, 1003)).digest('hex'));
    assert.equal(digestHex('sha256', new Uint8Array(0)), crypto.createHash('sha256').update(new Uint8Array(0)).digest('hex'));
  });

  it('refuses a piece Node would refuse, or none', () => {
    assert.throws(() => digestHex('sha256', data, 0), RangeError);
    assert.throws(() => digestHex('sha256', data, 2 ** 31), RangeError);
  });

  it('lets the range server serve an object of 2 GiB + 1 bytes (zero pages: next to no memory)', async (t) => {
    let big: Buffer;
    try {
      // Zero-filled and never written: the kernel backs it with its shared zero page.
      big = Buffer.alloc(2 ** 31 + 1);
    } catch (e) {
      return t.skip(`cannot reserve 2 GiB of address space here (${(e as Error).message})`);
    }
    // What put() did before: one update of the whole object.
    assert.throws(() => crypto.createHash('md5').update(big), { code: 'ERR_OUT_OF_RANGE' });
    const server = await new RangeServer().start();
    try {
      server.put('/object', big);
      const res = await fetch(server.url(), { method: 'HEAD' });
      assert.equal(res.headers.get('content-length'), String(2 ** 31 + 1));
      assert.match(res.headers.get('etag') ?? '', /^"[0-9a-f]{32}"$/);
    } finally {
      await server.stop();
    }
  });
});
