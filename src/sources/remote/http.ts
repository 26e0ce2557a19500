/**
 * One HTTP request for a byte range, on a kept-alive connection (connection.ts), with the answer
 * checked before a byte is kept: status, Content-Range against the range asked for,
 * Content-Length, body length and the object's identity (ETag, Last-Modified). Bodies are handed
 * to a sink piece by piece, with their offset, as views of the connection's read buffer, so each
 * byte is copied once in JavaScript, straight into its destination.
 */
import { AbortError } from '../../vocabulary/errors.js';
import { ConnectionPool, headerProblem, requestText, type Connection, type ConnectionFailure, type ResponseHead } from './connection.js';
import { RemoteError, type RemoteErrorCode } from './errors.js';
import { redactText, redactUrl } from './url.js';

export { ConnectionPool };

/** What a response must agree with; filled from the first answer when not known before. */
export interface ObjectIdentity {
  size?: number;
  etag?: string;
  lastModified?: string;
}

/** One request. */
export interface RangeRequest {
  method: 'GET' | 'HEAD';
  url: URL;
  /** Headers (signed when the object needs it); called once per attempt, so each is signed fresh. */
  headers: (range: string | undefined) => Record<string, string>;
  /** First byte; with `end` (exclusive) the range asked for. Both absent for a plain HEAD. */
  start?: number;
  end?: number;
  /** A size probe: only Content-Range's total and the identity are taken, the body is dropped. */
  probe?: boolean;
  /**
   * A redirect (301, 302, 303, 307, 308 with a Location) is handed back as the answer's
   * `location`, for the caller to follow; otherwise it is ERR_PENSTOCK_REMOTE_REDIRECT, with
   * `notFollowed` (why it is not followed) in its message.
   */
  followRedirect?: boolean;
  /** Why a redirect of this request is not followed, for the error's message. */
  notFollowed?: string;
}

/**
 * Receives a body piece by piece: `chunk` belongs at `offset` bytes into the range. `chunk` is a
 * view of a connection's read buffer, valid only during the call: copy it, never keep it.
 */
export type BodySink = (chunk: Buffer, offset: number) => void;

/** What a request found. */
export interface RangeAnswer {
  status: number;
  /** Bytes the body carried into the sink. */
  bytes: number;
  /** The object's size from Content-Range or (HEAD) Content-Length; undefined if neither told. */
  size?: number;
  etag?: string;
  lastModified?: string;
  /** A redirect's Location, as sent (requests with `followRedirect` only). */
  location?: string;
}

/** The statuses of redirects that name a new address in their Location. */
const REDIRECT_STATUS = new Set([301, 302, 303, 307, 308]);

/** Per-attempt limits. */
export interface RequestLimits {
  timeoutMs: number;
  signal?: AbortSignal;
  /** Bytes of the range already held from an earlier attempt (the request resumes there). */
  resumeAt?: number;
  /** Bytes received so far in this attempt, kept up to date for resuming after a failure. */
  progress?: { received: number };
}

const RETRYABLE_STATUS = new Set([429, 500, 502, 503, 504]);

/**
 * Body bytes a request must receive within each `timeoutMs` (or the rest of its range, when
 * less): a body that trickles in slower than this (a byte now and then) times out like a stalled
 * one, instead of holding its connection for ever.
 */
export const MIN_PROGRESS_BYTES = 64 * 1024;

/**
 * Sends one request and streams a ranged body into `sink`. Rejects with a {@link RemoteError}
 * (`transient` says whether another attempt may help) or an AbortError.
 */
export function requestRange(pool: ConnectionPool, req: RangeRequest, identity: ObjectIdentity, sink: BodySink | undefined, limits: RequestLimits): Promise<RangeAnswer> {
  const where = redactUrl(req.url);
  const resumeAt = limits.resumeAt ?? 0;
  const ranged = req.start !== undefined && req.end !== undefined;
  const first = (req.start ?? 0) + resumeAt;
  const last = (req.end ?? 0) - 1;
  const range = ranged ? `bytes=${first}-${last}` : undefined;
  return new Promise<RangeAnswer>((resolve, reject) => {
    const signal = limits.signal;
    if (signal?.aborted) return reject(new AbortError(undefined, { cause: signal.reason }));
    // Every byte of the range is already held (an earlier attempt received them all, and only
    // the end of its answer was missing): nothing is left to ask for.
    if (ranged && first > last) return resolve({ status: 206, bytes: 0 });
    let text: string;
    try {
      const headers = req.headers(range);
      if (identity.etag !== undefined && !identity.etag.startsWith('W/')) headers['If-Match'] = identity.etag;
      // Ranges must be of the object's own bytes, not of a compressed form of it. Added after
      // signing: a header that is not signed is allowed beside the signed ones.
      for (const k of Object.keys(headers)) if (k.toLowerCase() === 'accept-encoding') delete headers[k];
      headers['Accept-Encoding'] = 'identity';
      text = requestText(req.method, req.url, headers);
    } catch (e) {
      return reject(e);
    }
    let settled = false;
    let conn: Connection | undefined;
    let timer: NodeJS.Timeout | undefined;
    const finish = () => {
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    };
    /** Fails the request; its connection, if it has one, is closed (what is still on it is unknown). */
    const fail = (e: unknown) => {
      if (settled) return;
      finish();
      if (conn) {
        conn.destroy();
        pool.release(conn);
      }
      reject(e);
    };
    /** Settles once the response is complete, giving the connection back for the next request. */
    const settle = (then: () => void) => {
      if (settled) return;
      finish();
      if (conn) pool.release(conn);
      then();
    };
    const err = (code: RemoteErrorCode, msg: string, transient: boolean, extra: { status?: number; serverCode?: string; region?: string; retryAfterMs?: number; cause?: unknown } = {}) =>
      new RemoteError(code, msg, { url: where, ...extra }, transient);
    const onAbort = () => fail(new AbortError(undefined, { cause: signal?.reason }));
    signal?.addEventListener('abort', onAbort, { once: true });

    // What the response turned out to be, once its head has arrived: what its body is for, and
    // what its end means.
    let status = 0;
    let dataBody = false;
    let onBody: ((chunk: Buffer) => void) | undefined;
    let onEnd: () => void = () => fail(err('ERR_PENSTOCK_REMOTE_CONNECTION', 'The answer ended before its head', true));
    let got = 0;
    const want = last - first + 1;
    const short = () => err('ERR_PENSTOCK_REMOTE_SHORT_BODY', `The body ended after ${got} of the ${want} bytes its Content-Range promised`, true, { status });

    const head = (res: ResponseHead): void => {
      timer?.refresh();
      status = res.status;
      const header = (name: string) => res.headers.get(name);
      const etag = header('etag');
      const lastModified = header('last-modified');
      const answer = (a: RangeAnswer): RangeAnswer => {
        if (etag !== undefined) a.etag = etag;
        if (lastModified !== undefined) a.lastModified = lastModified;
        return a;
      };
      onEnd = () => fail(err('ERR_PENSTOCK_REMOTE_CONNECTION', 'An answer penstock did not expect', true, { status }));
      if (status === 416) {
        const m = /^\s*bytes\s+\*\/(\d+)\s*$/i.exec(header('content-range') ?? '');
        if (m && identity.size !== undefined && Number(m[1]) === identity.size)
          return fail(err('ERR_PENSTOCK_REMOTE_BAD_RANGE', `The server refused the range ${range} (416) of an object whose size, ${identity.size}, has not changed`, false, { status }));
        if (m && identity.size !== undefined)
          return fail(err('ERR_PENSTOCK_REMOTE_CHANGED', `The object changed during the read: its size was ${identity.size}, the server now says ${m[1]}`, false, { status }));
        // A size probe (bytes=0-0) of an empty object: `bytes */0` tells the size.
        if (m && req.probe) {
          onEnd = () => settle(() => resolve({ status, bytes: 0, size: Number(m[1]) }));
          return;
        }
      }
      const location = header('location');
      if (req.followRedirect && REDIRECT_STATUS.has(status) && location !== undefined) {
        // Its body says nothing penstock needs; the connection is not worth waiting for.
        conn?.destroy();
        settle(() => resolve({ status, bytes: 0, location }));
        return;
      }
      if (status >= 300 || (status !== 200 && status !== 206)) {
        // The error body (S3's XML) is read for its <Code> and <Region>; its first 8 KiB suffice.
        const pieces: Buffer[] = [];
        let kept = 0;
        onBody = (chunk) => {
          if (kept >= 8192) return;
          const piece = Buffer.from(chunk.subarray(0, 8192 - kept));
          pieces.push(piece);
          kept += piece.length;
        };
        onEnd = () => {
          const e = statusError(status, res, Buffer.concat(pieces).toString('utf8'), req.method === 'HEAD', err, req.notFollowed);
          settle(() => reject(e));
        };
        return;
      }
      const encoding = header('content-encoding');
      if (encoding !== undefined && !/^\s*(identity\s*)?$/i.test(encoding))
        return fail(err('ERR_PENSTOCK_REMOTE_ENCODED', `The server answered with Content-Encoding: ${encoding.slice(0, 40)}, although penstock asked for the object's own bytes (Accept-Encoding: identity); the bytes would be those of the encoded form`, false, { status }));
      if (etag !== undefined && headerProblem('ETag', etag))
        return fail(err('ERR_PENSTOCK_REMOTE_BAD_HEADER', 'The server sent an ETag holding control characters, which cannot be sent back in If-Match', false, { status }));
      for (const name of ['content-range', 'content-length']) {
        const v = header(name);
        if (v !== undefined && (v.match(/\d+/g) ?? []).some((d) => !Number.isSafeInteger(Number(d))))
          return fail(err('ERR_PENSTOCK_REMOTE_BAD_HEADER', `The server's ${name === 'content-range' ? 'Content-Range' : 'Content-Length'} holds a number too large to be a byte count (${v.slice(0, 60)})`, false, { status }));
      }
      const changed = identityChange(identity, etag, lastModified);
      if (changed) return fail(err('ERR_PENSTOCK_REMOTE_CHANGED', `The object changed during the read: ${changed}`, false, { status }));
      if (req.method === 'HEAD') {
        const len = header('content-length');
        const a: RangeAnswer = { status, bytes: 0 };
        if (len !== undefined && /^\d+$/.test(len)) a.size = Number(len);
        onEnd = () => settle(() => resolve(answer(a)));
        return;
      }
      if (status === 200 && ranged)
        return fail(err('ERR_PENSTOCK_REMOTE_RANGE_IGNORED', `The server sent the whole object (200) for the range ${range}: it does not serve ranged reads, so penstock cannot read it in parallel or verify the range`, false, { status }));
      const cr = parseContentRange(header('content-range'));
      if (req.probe) {
        // Only the total and the identity are wanted, no byte is kept. The last byte is not
        // insisted on (some servers, s3rver among them, answer bytes=0-0 with the whole object;
        // every data range is checked exactly); a large body is dropped with its connection.
        if (!cr || cr.first !== 0 || cr.total === undefined)
          return fail(err('ERR_PENSTOCK_REMOTE_NO_SIZE', `The answer to the size probe ${range} told no size (Content-Range: ${header('content-range') ?? 'none'})`, false, { status }));
        const a = answer({ status, bytes: 0, size: cr.total });
        if (Number(header('content-length') ?? Infinity) > 65536) {
          conn?.destroy();
          settle(() => resolve(a));
          return;
        }
        onEnd = () => settle(() => resolve(a));
        return;
      }
      if (cr && identity.size !== undefined && cr.total !== undefined && cr.total !== identity.size)
        return fail(err('ERR_PENSTOCK_REMOTE_CHANGED', `The object changed during the read: its size was ${identity.size}, the server now says ${cr.total}`, false, { status }));
      if (!cr || cr.first !== first || cr.last !== last) {
        const said = header('content-range') ?? 'none';
        return fail(err('ERR_PENSTOCK_REMOTE_BAD_RANGE', `Asked for ${range}${identity.size !== undefined ? ` of ${identity.size}` : ''}, the server answered Content-Range: ${said}`, false, { status }));
      }
      const len = header('content-length');
      if (len !== undefined && Number(len) !== want)
        return fail(err('ERR_PENSTOCK_REMOTE_BAD_RANGE', `Content-Length ${len} disagrees with Content-Range ${header('content-range')}`, false, { status }));
      if (limits.progress) limits.progress.received = 0;
      dataBody = true;
      let sinceBeat = 0;
      onBody = (chunk) => {
        if (got + chunk.length > want) return fail(err('ERR_PENSTOCK_REMOTE_LONG_BODY', `The body ran past the ${want} bytes of its Content-Range`, false, { status }));
        sink?.(chunk, resumeAt + got);
        got += chunk.length;
        if (limits.progress) limits.progress.received = got;
        sinceBeat += chunk.length;
        if (sinceBeat >= MIN_PROGRESS_BYTES || got === want) {
          sinceBeat = 0;
          timer?.refresh();
        }
      };
      complete = () => {
        const a: RangeAnswer = { status, bytes: got };
        if (cr.total !== undefined) a.size = cr.total;
        settle(() => resolve(answer(a)));
      };
      onEnd = () => (got !== want ? fail(short()) : complete!());
    };
    /**
     * Every byte of the range arrived but the answer did not end (a chunked body without its last
     * chunk, say): the range is complete, only the connection is unfit for another request.
     */
    let complete: (() => void) | undefined;
    const whole = () => dataBody && got === want && complete !== undefined;

    const broken = (why: ConnectionFailure): void => {
      if (whole()) return complete!();
      if (why.kind === 'proxy') return fail(why.error);
      if (why.kind === 'socket') {
        const code = why.error.code ?? '';
        // A certificate that is not trusted stays so: not worth a retry.
        if (/CERT|SELF_SIGNED|UNABLE_TO_VERIFY|ERR_TLS_|ERR_SSL_/.test(code))
          return fail(err('ERR_PENSTOCK_REMOTE_TLS', `The server's certificate was refused (${code}): pass its CA as the ca option if it is a private one`, false, { cause: { code } }));
        if (dataBody) return fail(short());
        return fail(err('ERR_PENSTOCK_REMOTE_CONNECTION', `Connection failed (${code || why.error.message})`, true, { cause: { code } }));
      }
      if (dataBody) return fail(short());
      if (why.kind === 'protocol') return fail(err('ERR_PENSTOCK_REMOTE_CONNECTION', `The server's answer is not valid HTTP/1.1: ${why.message}`, true));
      fail(err('ERR_PENSTOCK_REMOTE_CONNECTION', why.gotHead ? 'The connection closed before the answer ended' : 'The connection closed before an answer came', true));
    };

    pool.acquire(req.url, signal).then(
      (c) => {
        if (settled) return pool.release(c);
        conn = c;
        // Started once the request has a connection, so time spent queued behind the pool's cap
        // (other reads of the same object) is not taken for a stalled server.
        timer = setTimeout(() => {
          if (whole()) {
            conn?.destroy();
            return complete!();
          }
          fail(err('ERR_PENSTOCK_REMOTE_TIMEOUT', `No progress from the server within the timeout (remoteTimeoutMs: ${limits.timeoutMs}; a body must bring ${MIN_PROGRESS_BYTES / 1024} KiB, or the rest of its range, in each)`, true));
        }, limits.timeoutMs);
        c.exchange(text, req.method === 'HEAD', { head, body: (chunk) => onBody?.(chunk), end: () => onEnd(), fail: broken });
      },
      (e: unknown) => fail(signal?.aborted ? new AbortError(undefined, { cause: signal.reason }) : e),
    );
  });
}

/** `bytes first-last/total` (total may be `*`); undefined when malformed or a number is not a safe integer. */
export function parseContentRange(v: string | undefined): { first: number; last: number; total?: number } | undefined {
  const m = v === undefined ? null : /^\s*bytes\s+(\d+)-(\d+)\/(\d+|\*)\s*$/i.exec(v);
  if (!m) return undefined;
  const first = Number(m[1]);
  const last = Number(m[2]);
  if (last < first || !Number.isSafeInteger(last) || (m[3] !== '*' && !Number.isSafeInteger(Number(m[3])))) return undefined;
  return m[3] === '*' ? { first, last } : { first, last, total: Number(m[3]) };
}

/**
 * Why an answer may be of another version of the object, if it may: the validator the object was
 * opened with (its ETag, else its Last-Modified) must come back unchanged in every answer. An
 * answer without it cannot prove it is of the same version (a server that ignored If-Match and
 * serves another version may send none), so it is refused too, rather than mixed in.
 */
function identityChange(id: ObjectIdentity, etag: string | undefined, lastModified: string | undefined): string | undefined {
  if (id.etag !== undefined) {
    if (etag === undefined) return `the object was opened with ETag ${id.etag}, and an answer came without one`;
    return etag !== id.etag ? `ETag ${id.etag} became ${etag}` : undefined;
  }
  if (id.lastModified !== undefined) {
    if (lastModified === undefined) return `the object was opened with Last-Modified ${id.lastModified}, and an answer came without one`;
    if (lastModified !== id.lastModified) return `Last-Modified ${id.lastModified} became ${lastModified}`;
  }
  return undefined;
}

function xmlField(body: string, tag: string): string | undefined {
  const m = new RegExp(`<${tag}>([^<]{0,300})</${tag}>`).exec(body);
  return m?.[1];
}

type MakeError = (code: RemoteErrorCode, msg: string, transient: boolean, extra?: { status?: number; serverCode?: string; region?: string; retryAfterMs?: number }) => RemoteError;

/** Retry-After as milliseconds: delay-seconds or an HTTP date; undefined when absent or malformed. */
export function parseRetryAfter(v: string | undefined, now = Date.now()): number | undefined {
  if (v === undefined) return undefined;
  if (/^\s*\d+\s*$/.test(v)) return Number(v) * 1000;
  const t = Date.parse(v);
  return Number.isNaN(t) ? undefined : Math.max(0, t - now);
}

/**
 * The error for a non-2xx answer. Only S3's `<Code>` and `<Region>` are taken from the body:
 * the rest of an S3 error body can echo the string to sign and the access key id.
 */
function statusError(status: number, res: ResponseHead, body: string, head: boolean, err: MakeError, notFollowed?: string): RemoteError {
  const header = (name: string) => res.headers.get(name);
  const serverCode = xmlField(body, 'Code');
  const region = header('x-amz-bucket-region') ?? xmlField(body, 'Region');
  const extra = { status, ...(serverCode ? { serverCode } : {}), ...(region ? { region } : {}) };
  const named = serverCode ? ` ${serverCode}` : '';
  if (RETRYABLE_STATUS.has(status)) {
    const wait = parseRetryAfter(header('retry-after'));
    return err('ERR_PENSTOCK_REMOTE_UNAVAILABLE', `The server answered ${status}${named}`, true, { ...extra, ...(wait !== undefined ? { retryAfterMs: wait } : {}) });
  }
  if (status === 407) return err('ERR_PENSTOCK_REMOTE_PROXY', 'The proxy (HTTP_PROXY) wants credentials: put them in its URL, http://user:password@proxy:port', false, extra);
  if (status === 412) return err('ERR_PENSTOCK_REMOTE_CHANGED', 'The object changed during the read (If-Match failed: its ETag is no longer the one read first)', false, extra);
  if (status >= 300 && status < 400) {
    const loc = header('location');
    const hint = region
      ? `the bucket is in region ${region}: set region: '${region}' (or AWS_REGION=${region})`
      : loc
        ? `the object is at ${/^https?:/i.test(loc) ? redactText(loc) : `the path ${loc.replace(/\?.*$/s, '')} of this server`}: open that address instead`
        : 'the server named no new address';
    return err('ERR_PENSTOCK_REMOTE_REDIRECT', `The server redirected (${status}${named}): ${hint}${notFollowed ? ` (not followed: ${notFollowed})` : ''}`, false, extra);
  }
  if (serverCode === 'AuthorizationHeaderMalformed' || serverCode === 'IllegalLocationConstraintException' || (status === 400 && region)) {
    return err('ERR_PENSTOCK_REMOTE_WRONG_REGION', `The server refused the request's region (${status}${named})${region ? `: set region: '${region}' (or AWS_REGION=${region})` : ': set the bucket\'s region (region option or AWS_REGION)'}`, false, extra);
  }
  if (status === 401 || status === 403) {
    const why = serverCode === 'SignatureDoesNotMatch' ? ': the signature does not match (a wrong secret key, or an altered presigned URL)'
      : serverCode === 'InvalidAccessKeyId' ? ': the server knows no such access key id'
        : serverCode === 'AccessDenied' && head ? ' (a URL presigned for GET cannot be used for HEAD)'
          : serverCode === 'RequestTimeTooSkewed' ? ': the clock of this machine is off'
            : head && !serverCode ? ' (an answer to HEAD carries no error code: check the key pair, and that the object exists, as S3 answers 403 for a missing key to those who may not list the bucket)' : '';
    return err('ERR_PENSTOCK_REMOTE_ACCESS_DENIED', `Access denied (${status}${named})${why}`, false, extra);
  }
  if (status === 404) return err('ERR_PENSTOCK_REMOTE_NOT_FOUND', `No such object (404${named})`, false, extra);
  return err('ERR_PENSTOCK_REMOTE_HTTP', `The server answered ${status}${named}`, false, extra);
}
