/**
 * One HTTP request for a byte range, on connections kept alive, with the answer checked before a
 * byte is kept: status, Content-Range against the range asked for, Content-Length, body length
 * and the object's identity (ETag, Last-Modified). Bodies are handed to a sink chunk by chunk,
 * with their offset, so they are copied once, straight into their destination.
 */
import http from 'node:http';
import https from 'node:https';
import tls from 'node:tls';
import type { LookupFunction } from 'node:net';
import { AbortError } from '../errors.js';
import { RemoteError, type RemoteErrorCode } from './errors.js';
import { redactText, redactUrl } from './url.js';

/** Keep-alive agents per scheme, shared by one source's requests. */
export class ConnectionPool {
  readonly #http: http.Agent;
  readonly #https: https.Agent;

  /** `ca`: certificates to trust for https:// besides the system's (a private CA, say). */
  constructor(maxSockets: number, lookup?: LookupFunction, ca?: string) {
    const opts = { keepAlive: true, keepAliveMsecs: 1000, maxSockets, maxFreeSockets: maxSockets, scheduling: 'lifo' as const, ...(lookup ? { lookup } : {}) };
    this.#http = new http.Agent(opts);
    this.#https = new https.Agent({ ...opts, ...(ca ? { ca: [...tls.rootCertificates, ca] } : {}) });
  }

  agentFor(url: URL): http.Agent {
    return url.protocol === 'https:' ? this.#https : this.#http;
  }

  /** Closes every connection, idle or not. */
  destroy(): void {
    this.#http.destroy();
    this.#https.destroy();
  }
}

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
}

/** Receives a body piece by piece: `chunk` belongs at `offset` bytes into the range. */
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
}

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
    if (limits.signal?.aborted) return reject(new AbortError(undefined, { cause: limits.signal.reason }));
    let settled = false;
    const headers = req.headers(range);
    if (identity.etag !== undefined && !identity.etag.startsWith('W/')) headers['If-Match'] = identity.etag;
    const r = (req.url.protocol === 'https:' ? https : http).request({
      agent: pool.agentFor(req.url),
      method: req.method,
      protocol: req.url.protocol,
      hostname: req.url.hostname.replace(/^\[|\]$/g, ''),
      port: req.url.port || undefined,
      path: `${req.url.pathname}${req.url.search}`,
      headers,
    });
    // Started once the request has a socket, so time spent queued behind the agent's cap (other
    // reads of the same object) is not taken for a stalled server.
    let timer: NodeJS.Timeout | undefined;
    const fail = (e: Error) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      limits.signal?.removeEventListener('abort', onAbort);
      r.destroy();
      reject(e);
    };
    const done = (a: RangeAnswer) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      limits.signal?.removeEventListener('abort', onAbort);
      resolve(a);
    };
    const err = (code: RemoteErrorCode, msg: string, transient: boolean, extra: { status?: number; serverCode?: string; region?: string; retryAfterMs?: number; cause?: unknown } = {}) =>
      new RemoteError(code, msg, { url: where, ...extra }, transient);
    r.once('socket', () => {
      if (!settled) timer = setTimeout(() => fail(err('ERR_PENSTOCK_REMOTE_TIMEOUT', 'No progress from the server within the timeout (remoteTimeoutMs)', true)), limits.timeoutMs);
    });
    const onAbort = () => fail(new AbortError(undefined, { cause: limits.signal?.reason }));
    limits.signal?.addEventListener('abort', onAbort, { once: true });
    r.on('error', (e: NodeJS.ErrnoException) => {
      // A certificate that is not trusted stays so: not worth a retry.
      if (/CERT|SELF_SIGNED|UNABLE_TO_VERIFY|ERR_TLS_|ERR_SSL_/.test(e.code ?? ''))
        return fail(err('ERR_PENSTOCK_REMOTE_TLS', `The server's certificate was refused (${e.code}): pass its CA as the ca option if it is a private one`, false, { cause: { code: e.code } }));
      fail(err('ERR_PENSTOCK_REMOTE_CONNECTION', `Connection failed (${e.code ?? e.message})`, true, { cause: { code: e.code } }));
    });
    r.on('response', (res) => {
      timer?.refresh();
      const status = res.statusCode ?? 0;
      const etag = header(res, 'etag');
      const lastModified = header(res, 'last-modified');
      if (status === 416) {
        const m = /^\s*bytes\s+\*\/(\d+)\s*$/i.exec(header(res, 'content-range') ?? '');
        if (m && identity.size !== undefined) {
          res.resume();
          return fail(err('ERR_PENSTOCK_REMOTE_CHANGED', `The object changed during the read: its size was ${identity.size}, the server now says ${m[1]}`, false, { status }));
        }
        // A size probe (bytes=0-0) of an empty object: `bytes */0` tells the size.
        if (m && req.probe) {
          res.resume();
          return done({ status, bytes: 0, size: Number(m[1]) });
        }
      }
      if (status >= 300 || (status !== 200 && status !== 206)) {
        readErrorBody(res, (body) => fail(statusError(status, res, body, req.method === 'HEAD', err)));
        return;
      }
      const changed = identityChange(identity, etag, lastModified);
      if (changed) {
        res.resume();
        return fail(err('ERR_PENSTOCK_REMOTE_CHANGED', `The object changed during the read: ${changed}`, false, { status }));
      }
      if (req.method === 'HEAD') {
        res.resume();
        const len = header(res, 'content-length');
        const a: RangeAnswer = { status, bytes: 0 };
        if (len !== undefined && /^\d+$/.test(len)) a.size = Number(len);
        if (etag !== undefined) a.etag = etag;
        if (lastModified !== undefined) a.lastModified = lastModified;
        return done(a);
      }
      if (status === 200 && ranged) {
        res.resume();
        return fail(err('ERR_PENSTOCK_REMOTE_RANGE_IGNORED', `The server sent the whole object (200) for the range ${range}: it does not serve ranged reads, so penstock cannot read it in parallel or verify the range`, false, { status }));
      }
      const cr = parseContentRange(header(res, 'content-range'));
      if (req.probe) {
        // Only the total and the identity are wanted, no byte is kept. The last byte is not
        // insisted on (some servers, s3rver among them, answer bytes=0-0 with the whole object;
        // every data range is checked exactly); a large body is dropped with its connection.
        const bodyLength = Number(header(res, 'content-length') ?? Infinity);
        if (bodyLength <= 65536) res.resume();
        else res.destroy();
        if (!cr || cr.first !== 0 || cr.total === undefined)
          return fail(err('ERR_PENSTOCK_REMOTE_NO_SIZE', `The answer to the size probe ${range} told no size (Content-Range: ${header(res, 'content-range') ?? 'none'})`, false, { status }));
        const a: RangeAnswer = { status, bytes: 0, size: cr.total };
        if (etag !== undefined) a.etag = etag;
        if (lastModified !== undefined) a.lastModified = lastModified;
        return done(a);
      }
      if (!cr || cr.first !== first || cr.last !== last || (identity.size !== undefined && cr.total !== undefined && cr.total !== identity.size)) {
        res.resume();
        const got = header(res, 'content-range') ?? 'none';
        return fail(err('ERR_PENSTOCK_REMOTE_BAD_RANGE', `Asked for ${range}${identity.size !== undefined ? ` of ${identity.size}` : ''}, the server answered Content-Range: ${got}`, false, { status }));
      }
      const want = last - first + 1;
      const len = header(res, 'content-length');
      if (len !== undefined && Number(len) !== want) {
        res.resume();
        return fail(err('ERR_PENSTOCK_REMOTE_BAD_RANGE', `Content-Length ${len} disagrees with Content-Range ${header(res, 'content-range')}`, false, { status }));
      }
      let got = 0;
      if (limits.progress) limits.progress.received = 0;
      res.on('data', (chunk: Buffer) => {
        if (settled) return;
        timer?.refresh();
        if (got + chunk.length > want) return fail(err('ERR_PENSTOCK_REMOTE_LONG_BODY', `The body ran past the ${want} bytes of its Content-Range`, false, { status }));
        sink?.(chunk, resumeAt + got);
        got += chunk.length;
        if (limits.progress) limits.progress.received = got;
      });
      const short = () => err('ERR_PENSTOCK_REMOTE_SHORT_BODY', `The body ended after ${got} of the ${want} bytes its Content-Range promised`, true, { status });
      res.on('aborted', () => fail(short()));
      res.on('error', () => fail(short()));
      res.on('end', () => {
        if (got !== want) return fail(short());
        const a: RangeAnswer = { status, bytes: got };
        if (cr.total !== undefined) a.size = cr.total;
        if (etag !== undefined) a.etag = etag;
        if (lastModified !== undefined) a.lastModified = lastModified;
        done(a);
      });
    });
    r.end();
  });
}

function header(res: http.IncomingMessage, name: string): string | undefined {
  const v = res.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

/** `bytes first-last/total` (total may be `*`); undefined when malformed. */
export function parseContentRange(v: string | undefined): { first: number; last: number; total?: number } | undefined {
  const m = v === undefined ? null : /^\s*bytes\s+(\d+)-(\d+)\/(\d+|\*)\s*$/i.exec(v);
  if (!m) return undefined;
  const first = Number(m[1]);
  const last = Number(m[2]);
  if (last < first) return undefined;
  return m[3] === '*' ? { first, last } : { first, last, total: Number(m[3]) };
}

/** Why an answer's ETag or Last-Modified shows another version of the object, if it does. */
function identityChange(id: ObjectIdentity, etag: string | undefined, lastModified: string | undefined): string | undefined {
  if (id.etag !== undefined && etag !== undefined && etag !== id.etag) return `ETag ${id.etag} became ${etag}`;
  if (id.etag === undefined && id.lastModified !== undefined && lastModified !== undefined && lastModified !== id.lastModified)
    return `Last-Modified ${id.lastModified} became ${lastModified}`;
  return undefined;
}

function readErrorBody(res: http.IncomingMessage, then: (body: string) => void): void {
  let body = '';
  res.setEncoding('utf8');
  res.on('data', (s: string) => {
    if (body.length < 8192) body += s;
  });
  res.on('end', () => then(body));
  res.on('error', () => then(body));
  res.on('aborted', () => then(body));
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
function statusError(status: number, res: http.IncomingMessage, body: string, head: boolean, err: MakeError): RemoteError {
  const serverCode = xmlField(body, 'Code');
  const region = header(res, 'x-amz-bucket-region') ?? xmlField(body, 'Region');
  const extra = { status, ...(serverCode ? { serverCode } : {}), ...(region ? { region } : {}) };
  const named = serverCode ? ` ${serverCode}` : '';
  if (RETRYABLE_STATUS.has(status)) {
    const wait = parseRetryAfter(header(res, 'retry-after'));
    return err('ERR_PENSTOCK_REMOTE_UNAVAILABLE', `The server answered ${status}${named}`, true, { ...extra, ...(wait !== undefined ? { retryAfterMs: wait } : {}) });
  }
  if (status === 412) return err('ERR_PENSTOCK_REMOTE_CHANGED', 'The object changed during the read (If-Match failed: its ETag is no longer the one read first)', false, extra);
  if (status >= 300 && status < 400) {
    const loc = header(res, 'location');
    const hint = region
      ? `the bucket is in region ${region}: set region: '${region}' (or AWS_REGION=${region})`
      : loc
        ? `the object is at ${/^https?:/i.test(loc) ? redactText(loc) : `the path ${loc.replace(/\?.*$/s, '')} of this server`}: open that address instead`
        : 'the server named no new address';
    return err('ERR_PENSTOCK_REMOTE_REDIRECT', `The server redirected (${status}${named}): ${hint}`, false, extra);
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
