/**
 * Remote objects with the read surface of a file: `openRemote(url)` finds the size (HEAD for
 * s3://, a 1-byte ranged GET for http(s)://, which presigned URLs allow), and `read()` splits a
 * read into ranges fetched in parallel on kept-alive connections, each body copied once, straight
 * into host memory, or into pinned staging that is copied to the GPU asynchronously.
 */
import { setMaxListeners } from 'node:events';
import type { LookupFunction } from 'node:net';
import { DeviceBuffer } from '../../memory/device-buffer.js';
import { Lifetime } from '../../memory/lifetime.js';
import { AbortError, usage } from '../../vocabulary/errors.js';
import type { Memory, ReadOptions } from '../../engine/file.js';
import { hostRegion, isHostMemory, regionBytes } from '../../memory/host-memory.js';
import { checkLength, checkRange, describe } from '../../vocabulary/validate.js';
import type { CredentialSource, S3Options } from './credentials.js';
import { resolveS3Access, type CredentialFeed } from './credential-chain.js';
import { RemoteError } from './errors.js';
import { headerProblem } from './connection.js';
import { ConnectionPool, requestRange, type BodySink, type ObjectIdentity, type RangeRequest } from './http.js';
import { withRetries, type Attempts } from './retry.js';
import { REMOTE_SETTING_NAMES, remoteSettings, type RemoteSettings, type ResolvedRemoteSettings } from './settings.js';
import { buildRequest, type RequestSpec } from './request-spec.js';
import { intoDevice, intoShared, ParseWorkers, type Destination } from './parse-workers.js';
import { StagingSlots } from './staging.js';
import { globalRemoteStats, RemoteStatsBook, type RemoteOpRecord, type RemoteRoute, type RemoteStatsSnapshot } from './stats.js';
import { parseRemoteUrl, redactText, redactUrl, s3ObjectUrl } from './url.js';
import type { Source } from '../source.js';

/** Redirects followed at most when an http(s):// object is opened (as `fetch` does). */
export const MAX_REDIRECTS = 10;

/** Options of {@link openRemote}: how to reach S3, and settings for this object's reads. */
export interface OpenRemoteOptions extends S3Options, Partial<RemoteSettings> {
  /**
   * Extra request headers for http(s):// objects (an `Authorization` bearer token, say); never
   * logged, and sent only to the origin of the URL given: a redirect to another origin drops them.
   */
  headers?: Record<string, string>;
  /** Host name resolution for the connections (as `net.connect`'s `lookup`). */
  lookup?: LookupFunction;
  /** PEM certificates to trust for https:// besides the system's (a private CA). */
  ca?: string;
  /** Cancels the open (its size probe and redirects): the Promise then rejects with an AbortError. */
  signal?: AbortSignal;
}

/** How a remote object is reached (nothing secret). */
export interface RemoteInfo {
  /** `s3` (signed or anonymous requests from s3://) or `http` (http(s)://, presigned or not). */
  kind: 's3' | 'http';
  /** The request URL, redacted (no query string, no user info): after redirects, the final one. */
  url: string;
  /** Redirects followed when the object was opened (http(s):// only). */
  redirects?: number;
  /** Whether requests carry a SigV4 signature (headers for s3://, the URL's own for presigned). */
  signed: boolean;
  /** For s3://: where the credentials came from, the region and the addressing used. */
  credentialSource?: CredentialSource;
  /** The region requests are signed for (s3:// only). */
  region?: string;
  /** The addressing the requests use, `auto` resolved (s3:// only). */
  addressing?: 'path' | 'virtual';
  /** How the size was found: `head` or `range-probe` (a 1-byte GET). */
  sizeFrom: 'head' | 'range-probe';
  /**
   * The process's worker threads this object's reads into GPU memory and SharedArrayBuffers use
   * (`remoteWorkers`, `'auto'` resolved); 0: the main thread makes all its requests. Reads into
   * other host memory run on the main thread either way.
   */
  parseWorkers: number;
}

/** One range of a read: `[start, end)` of the object, at `at` bytes into the read. */
interface Piece {
  start: number;
  end: number;
  at: number;
}

/**
 * A remote object opened for reading. Same read surface as a file (`size()`, `read()`,
 * `close()`); reads resolve to the bytes read, fewer than asked only at the object's end.
 */
export class RemoteObject implements Source {
  /** The object's address, redacted: `s3://bucket/key`, or the URL without query and user info. */
  readonly name: string;
  /** How the object is reached (nothing secret). */
  readonly info: RemoteInfo;
  readonly #size: number;
  readonly #identity: ObjectIdentity;
  readonly #settings: ResolvedRemoteSettings;
  readonly #pool: ConnectionPool;
  readonly #request: (start: number, end: number) => RangeRequest;
  readonly #stats = new RemoteStatsBook();
  readonly #lifetime: Lifetime;
  #staging: StagingSlots | undefined;
  readonly #parse: ParseWorkers | undefined;
  readonly #refresh: (() => Promise<void>) | undefined;
  #closing: Promise<void> | undefined;

  /** @internal Use {@link openRemote}. */
  constructor(init: { name: string; info: RemoteInfo; size: number; identity: ObjectIdentity; settings: ResolvedRemoteSettings; pool: ConnectionPool; request: (start: number, end: number) => RangeRequest; parse?: ParseWorkers; refresh?: () => Promise<void> }) {
    this.name = init.name;
    this.info = init.info;
    this.#size = init.size;
    this.#identity = init.identity;
    this.#settings = init.settings;
    this.#pool = init.pool;
    this.#request = init.request;
    this.#parse = init.parse;
    this.#refresh = init.refresh;
    this.#lifetime = new Lifetime(`The remote object ${init.name}`, 'ERR_PENSTOCK_REMOTE_CLOSED', 'is closed');
  }

  /** Alias of {@link name}, so code written for files can print either. */
  get path(): string {
    return this.name;
  }

  /** Whether `close()` has been called (reads then refuse). */
  get closed(): boolean {
    return this.#lifetime.ended;
  }

  /** The object's ETag as the server sent it when opened (undefined if it sent none). */
  get etag(): string | undefined {
    return this.#identity.etag;
  }

  /** Size of the object in bytes (found at open). */
  async size(): Promise<number> {
    this.#assertOpen();
    return this.#size;
  }

  /** This object's reads by route. */
  stats(): RemoteStatsSnapshot {
    return this.#stats.snapshot();
  }

  /** Pinned staging held for reads into GPU memory (freed by `close()`). */
  get stagingBytes(): number {
    return this.#staging?.pinnedBytes ?? 0;
  }

  /**
   * Reads `[fileOffset, fileOffset + size)` of the object into `target` at `targetOffset`.
   * Resolves to the bytes read (fewer only at the object's end; the rest of the target is not
   * touched). On failure the target range may hold part of the data; it never resolves with
   * bytes that were not verified against the range asked for and the object first opened.
   */
  async read(target: Memory, options: ReadOptions = {}): Promise<number> {
    return (await this.readRecorded(target, options)).bytes;
  }

  /** @internal A read that also reports its record. */
  async readRecorded(target: Memory, options: ReadOptions = {}): Promise<RemoteOpRecord> {
    this.#assertOpen();
    // Awaited here, so that errors carry the caller in their async stack.
    return await this.#lifetime.use(() => this.#start(target, options));
  }

  /** Closes the connections and frees the staging after reads in flight settle. Idempotent. */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      await this.#lifetime.endWhenIdle();
      this.#pool.destroy();
      await this.#parse?.close();
      this.#staging?.free();
      this.#staging = undefined;
    })();
    return this.#closing;
  }

  /** Closes the object at the end of an `await using` block (as `close()`). */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  #assertOpen(): void {
    if (this.#lifetime.ended) throw new RemoteError('ERR_PENSTOCK_REMOTE_CLOSED', `The remote object ${this.name} is closed`);
  }

  async #start(target: Memory, options: ReadOptions): Promise<RemoteOpRecord> {
    const fileOffset = options.fileOffset ?? 0;
    const targetOffset = options.targetOffset ?? 0;
    checkLength(fileOffset, 'fileOffset');
    checkLength(targetOffset, 'targetOffset');
    if (options.onProgress !== undefined && typeof options.onProgress !== 'function')
      throw usage('ERR_PENSTOCK_INVALID_ARGUMENT', 'onProgress must be a function');
    const signal = options.signal;
    if (signal !== undefined && !(signal instanceof AbortSignal)) throw usage('ERR_PENSTOCK_INVALID_ARGUMENT', 'signal must be an AbortSignal');
    if (signal?.aborted) throw new AbortError(undefined, { cause: signal.reason });
    let length: number;
    if (target instanceof DeviceBuffer) {
      target.assertLive();
      length = target.byteLength;
    } else if (isHostMemory(target)) {
      length = hostRegion(target, 'target').length;
    } else {
      throw usage('ERR_PENSTOCK_INVALID_BUFFER', `Expected a DeviceBuffer, PinnedBuffer, Buffer, TypedArray, DataView or ArrayBuffer, got ${describe(target)}`);
    }
    const size = options.size ?? Math.max(0, length - targetOffset);
    checkLength(size, 'size');
    checkRange(targetOffset, size, length, target instanceof DeviceBuffer ? 'DeviceBuffer' : 'target buffer');
    const n = Math.max(0, Math.min(size, this.#size - fileOffset));
    const pieces: Piece[] = [];
    for (let at = 0; at < n; at += this.#settings.remoteRangeSize) {
      const len = Math.min(this.#settings.remoteRangeSize, n - at);
      pieces.push({ start: fileOffset + at, end: fileOffset + at + len, at });
    }
    const route: RemoteRoute = target instanceof DeviceBuffer ? 'remote-device' : 'remote-host';
    const t0 = performance.now();
    const counts: Attempts = { requests: 0, retries: 0 };
    const record = (failed: boolean): RemoteOpRecord => {
      const rec: RemoteOpRecord = { route, requests: counts.requests, retries: counts.retries, bytes: failed ? 0 : n, seconds: (performance.now() - t0) / 1e3, failed };
      this.#stats.record(rec);
      globalRemoteStats.record(rec);
      return rec;
    };
    try {
      if (target instanceof DeviceBuffer) {
        await target.withBusy(() => this.#intoDevice(target, targetOffset, pieces, counts, signal, options.onProgress));
      } else {
        const region = hostRegion(target, 'target');
        const bytes = regionBytes(region, targetOffset, size);
        // Worker threads can write only into shared memory; any other host memory is written
        // here, where its one copy (from the connection's read buffer) has to happen anyway.
        const shared = this.#parse !== undefined && bytes.buffer instanceof SharedArrayBuffer;
        const fetchAll = () => this.#fetchAll(pieces, counts, signal, options.onProgress, async (p) => (chunk, off) => bytes.set(chunk, p.at + off), shared ? (p) => intoShared(bytes, p.at) : undefined);
        await (region.pinned ? region.pinned.use(fetchAll) : fetchAll());
      }
    } catch (e) {
      record(true);
      throw e;
    }
    return record(false);
  }

  async #intoDevice(target: DeviceBuffer, targetOffset: number, pieces: Piece[], counts: Attempts, signal: AbortSignal | undefined, onProgress: ((n: number) => void) | undefined): Promise<void> {
    if (pieces.length === 0) return;
    if (this.#parse) {
      // The workers copy to the GPU themselves, through their own pinned slots.
      const unused = async (): Promise<BodySink> => () => undefined;
      return this.#fetchAll(pieces, counts, signal, onProgress, unused, (p) => intoDevice(target, targetOffset + p.at));
    }
    this.#staging ??= new StagingSlots(this.#settings.remoteRangeSize, this.#settings.remoteConcurrency + 4);
    const staging = this.#staging;
    const copies = new Set<Promise<void>>();
    let copyError: unknown;
    await this.#fetchAll(pieces, counts, signal, onProgress, async (p) => {
      if (copyError) throw copyError;
      const slot = await staging.take();
      const view = slot.bytes;
      return Object.assign((chunk: Buffer, off: number) => view.set(chunk, off), {
        // Called once the range's bytes are all in the slot: queue the copy, free the slot after it.
        complete: () => {
          const c = target
            .copyFrom(view.subarray(0, p.end - p.start), { offset: targetOffset + p.at })
            .catch((e: unknown) => {
              copyError ??= e;
            })
            .finally(() => {
              copies.delete(c);
              staging.give(slot);
            });
          copies.add(c);
        },
        abandon: () => staging.give(slot),
      });
    }).finally(() => Promise.allSettled([...copies]));
    while (copies.size > 0) await Promise.allSettled([...copies]);
    if (copyError) throw copyError;
  }

  /**
   * Fetches every piece with at most `remoteConcurrency` requests in flight. The first lasting
   * failure cancels the rest, and is what the read rejects with.
   */
  async #fetchAll(
    pieces: Piece[],
    counts: Attempts,
    signal: AbortSignal | undefined,
    onProgress: ((n: number) => void) | undefined,
    sinkFor: (p: Piece) => Promise<BodySink & { complete?: () => void; abandon?: () => void }>,
    inWorker?: (p: Piece) => Destination,
  ): Promise<void> {
    const inner = new AbortController();
    // Every request in flight listens on it (and each retry's sleep): more than the default 10.
    setMaxListeners(0, inner.signal);
    const onAbort = () => inner.abort(signal?.reason);
    signal?.addEventListener('abort', onAbort, { once: true });
    let next = 0;
    let done = 0;
    let reported = false;
    const progress = () => {
      if (!onProgress || reported) return;
      reported = true;
      setImmediate(() => {
        reported = false;
        try {
          onProgress(done);
        } catch (err) {
          queueMicrotask(() => {
            throw err;
          });
        }
      });
    };
    const s = this.#settings;
    const worker = async () => {
      while (next < pieces.length && !inner.signal.aborted) {
        const p = pieces[next++]!;
        // Credentials that expire are renewed before they do (a read can outlast them).
        await this.#refresh?.();
        if (inWorker && this.#parse) {
          await this.#parse.run({ start: p.start, end: p.end, ...inWorker(p) }, counts, inner.signal);
          done += p.end - p.start;
          progress();
          continue;
        }
        const sink = await sinkFor(p);
        const held = { received: 0 };
        let resumeAt = 0;
        try {
          await withRetries(
            () => {
              const req = this.#request(p.start, p.end);
              return requestRange(this.#pool, req, this.#identity, (chunk, off) => {
                sink(chunk, off);
                done += chunk.length;
                progress();
              }, { timeoutMs: s.remoteTimeoutMs, signal: inner.signal, resumeAt, progress: held });
            },
            { retries: s.remoteRetries, baseMs: s.remoteRetryBaseMs, signal: inner.signal, counts, onRetry: () => {
              resumeAt += held.received;
              held.received = 0;
            } },
          );
        } catch (e) {
          sink.abandon?.();
          throw e;
        }
        sink.complete?.();
      }
    };
    const workers = Array.from({ length: Math.min(s.remoteConcurrency, pieces.length) }, () =>
      worker().catch((e: unknown) => {
        inner.abort(e);
        throw e;
      }),
    );
    try {
      const results = await Promise.allSettled(workers);
      if (signal?.aborted) throw new AbortError(undefined, { cause: signal.reason });
      // The first failure, not the cancellations it caused in the other workers.
      const failures = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected').map((r) => r.reason as unknown);
      const first = failures.find((e) => !(e instanceof AbortError)) ?? failures[0];
      if (first !== undefined) throw first;
      if (onProgress && done > 0) onProgress(done);
    } finally {
      signal?.removeEventListener('abort', onAbort);
    }
  }
}

/**
 * Opens a remote object: `s3://bucket/key` (signed with credentials from the options, the
 * environment or the shared AWS files; see {@link S3Options}), or an `http(s)://` URL (presigned
 * S3 URLs included). Finds the size and the object's ETag, which every later range must match.
 */
export async function openRemote(url: string, options: OpenRemoteOptions = {}): Promise<RemoteObject> {
  const addr = parseRemoteUrl(url);
  const signal = options.signal;
  if (signal !== undefined && !(signal instanceof AbortSignal)) throw usage('ERR_PENSTOCK_INVALID_ARGUMENT', 'signal must be an AbortSignal');
  if (signal?.aborted) throw new AbortError(undefined, { cause: signal.reason });
  const settings = remoteSettings(settingsOf(options), options.lookup !== undefined);
  if (options.lookup && settings.remoteWorkers > 0)
    throw usage('ERR_PENSTOCK_INVALID_ARGUMENT', "lookup (a function) cannot reach worker threads: use it with remoteWorkers 0 or 'auto'");
  const access = addr.kind === 's3' ? await resolveS3Access(options) : undefined;
  const pool = new ConnectionPool(settings.remoteConcurrency, options.lookup, options.ca);
  let feed: CredentialFeed | undefined;
  let spec: RequestSpec;
  let info: Omit<RemoteInfo, 'sizeFrom' | 'parseWorkers'>;
  let name: string;
  if (addr.kind === 's3') {
    const cfg = access!.config;
    feed = access!.feed;
    const target = s3ObjectUrl(addr.bucket, addr.key, cfg);
    const creds = cfg.credentials;
    name = `s3://${addr.bucket}/${addr.key}`;
    const virtual = target.hostname.startsWith(`${addr.bucket}.`) && !target.pathname.startsWith(`/${addr.bucket}/`);
    info = { kind: 's3', url: redactUrl(target), signed: creds !== undefined, credentialSource: cfg.credentialSource, region: cfg.region, addressing: virtual ? 'virtual' : 'path' };
    spec = { url: target.href, ...(creds ? { s3: { credentials: creds, region: cfg.region } } : {}) };
  } else {
    // User info in the URL becomes Basic authentication (unless the headers carry an
    // Authorization of their own), sent to the URL's own origin only; it never appears in names.
    const url = new URL(addr.url.href);
    const user = url.username;
    const password = url.password;
    url.username = '';
    url.password = '';
    name = redactUrl(url);
    for (const [k, v] of Object.entries(options.headers ?? {})) {
      const problem = headerProblem(k, v);
      if (problem) {
        pool.destroy();
        throw usage('ERR_PENSTOCK_INVALID_ARGUMENT', `headers: ${problem}`);
      }
    }
    const headers = { ...(options.headers ?? {}) };
    if ((user !== '' || password !== '') && !Object.keys(headers).some((k) => k.toLowerCase() === 'authorization')) {
      let plain: string;
      try {
        plain = `${decodeURIComponent(user)}:${decodeURIComponent(password)}`;
      } catch {
        pool.destroy();
        throw new RemoteError('ERR_PENSTOCK_REMOTE_INVALID_URL', `The user info of ${name} holds a malformed percent-encoding`);
      }
      headers.Authorization = `Basic ${Buffer.from(plain, 'utf8').toString('base64')}`;
    }
    info = { kind: 'http', url: name, signed: addr.presigned, redirects: 0 };
    spec = { url: url.href, headers };
  }
  const request = (start: number | undefined, end: number | undefined, method: 'GET' | 'HEAD' = 'GET') => ({
    ...buildRequest(spec, start, end, method),
    notFollowed: addr.kind === 's3'
      ? 'the request is signed for this address, and a signature must not go elsewhere'
      : addr.presigned
        ? 'a presigned URL is signed for its own address, and its signature must not go elsewhere'
        : 'redirects are followed when an object is opened, and this one moved since',
  });
  const identity: ObjectIdentity = {};
  const counts: Attempts = { requests: 0, retries: 0 };
  const retry = { retries: settings.remoteRetries, baseMs: settings.remoteRetryBaseMs, counts, ...(signal ? { signal } : {}) };
  const limits = { timeoutMs: settings.remoteTimeoutMs, ...(signal ? { signal } : {}) };
  let sizeFrom: RemoteInfo['sizeFrom'];
  try {
    // HEAD for S3 (the usual way, and a wrong region answers it with the bucket's region); a
    // 1-byte GET for http(s), which a URL presigned for GET allows and which proves ranges work.
    const head = addr.kind === 's3';
    sizeFrom = head ? 'head' : 'range-probe';
    // Redirects of a plain http(s):// URL are followed here, once, as `fetch` follows them; every
    // range is then read from the final address.
    const follow = addr.kind === 'http' && !addr.presigned;
    let a = await withRetries(() => requestRange(pool, head ? request(undefined, undefined, 'HEAD') : { ...request(0, 1), probe: true, followRedirect: follow }, identity, undefined, limits), retry);
    for (let hops = 1; a.location !== undefined; hops++) {
      if (hops > MAX_REDIRECTS) throw new RemoteError('ERR_PENSTOCK_REMOTE_REDIRECT', `More than ${MAX_REDIRECTS} redirects (a loop, or a chain too long to follow)`, { url: name });
      spec = redirected(spec, a.location, name);
      info.redirects = hops;
      info.url = redactUrl(new URL(spec.url));
      a = await withRetries(() => requestRange(pool, { ...request(0, 1), probe: true, followRedirect: true }, identity, undefined, limits), retry);
    }
    if (a.size === undefined)
      throw new RemoteError('ERR_PENSTOCK_REMOTE_NO_SIZE', 'The server told no size (no Content-Length on HEAD, no total in Content-Range)', { url: name });
    identity.size = a.size;
    if (a.etag !== undefined) identity.etag = a.etag;
    if (a.lastModified !== undefined) identity.lastModified = a.lastModified;
  } catch (e) {
    pool.destroy();
    throw e;
  } finally {
    globalRemoteStats.recordProbe(counts.requests);
  }
  const parse = settings.remoteWorkers > 0 ? new ParseWorkers(settings.remoteWorkers, { spec, identity, settings, proxy: pool.proxy, ...(options.ca ? { ca: options.ca } : {}) }, name) : undefined;
  const s3 = spec.s3;
  const refresh = feed && s3 ? async () => void (s3.credentials = await feed.current()) : undefined;
  return new RemoteObject({ name, info: { ...info, sizeFrom, parseWorkers: settings.remoteWorkers }, size: identity.size, identity, settings, pool, request: (s, e) => request(s, e), ...(parse ? { parse } : {}), ...(refresh ? { refresh } : {}) });
}

/**
 * The requests of an object after a redirect to `location` (resolved against the address that
 * answered). Another origin (scheme, host or port) gets none of the caller's headers: they may
 * carry credentials (`Authorization`, the Basic authentication of the URL's user info, API keys)
 * meant for the origin the caller named.
 */
function redirected(spec: RequestSpec, location: string, name: string): RequestSpec {
  const from = new URL(spec.url);
  let to: URL;
  try {
    to = new URL(location, from);
  } catch {
    throw new RemoteError('ERR_PENSTOCK_REMOTE_REDIRECT', `The server redirected to ${JSON.stringify(redactText(location))}, which is not a URL`, { url: name });
  }
  if (to.protocol !== 'http:' && to.protocol !== 'https:')
    throw new RemoteError('ERR_PENSTOCK_REMOTE_REDIRECT', `The server redirected to a ${to.protocol} address; only http: and https: are followed`, { url: name });
  if (to.username !== '' || to.password !== '')
    throw new RemoteError('ERR_PENSTOCK_REMOTE_REDIRECT', 'The server redirected to an address with user info, which is not followed', { url: name });
  to.hash = '';
  const sameOrigin = to.origin === from.origin;
  return { url: to.href, headers: sameOrigin ? { ...(spec.headers ?? {}) } : {} };
}

function settingsOf(o: OpenRemoteOptions): Partial<RemoteSettings> {
  const out: Partial<RemoteSettings> = {};
  for (const key of REMOTE_SETTING_NAMES) if (o[key] !== undefined) (out as Record<string, unknown>)[key] = o[key];
  return out;
}
