/**
 * Remote addresses: `s3://bucket/key` and `http(s)://…` parsed, S3 objects turned into request
 * URLs (path-style or virtual-hosted), and addresses redacted for messages and stats.
 */
import { RemoteError } from './errors.js';

/** How an S3 bucket is put into the request URL. */
export type S3Addressing = 'path' | 'virtual' | 'auto';

/** A parsed remote address. */
export type RemoteAddress =
  | { kind: 's3'; bucket: string; key: string }
  | { kind: 'http'; url: URL; presigned: boolean };

/** Whether `text` names a remote object (`s3://`, `http://`, `https://`). */
export function isRemoteUrl(text: unknown): text is string {
  return typeof text === 'string' && /^(s3|https?):\/\//i.test(text);
}

// Bucket names as S3 allows them today (3–63 characters; lowercase, digits, dots, hyphens) and
// the older, laxer rules some S3-compatible servers still accept (capitals, underscores).
const BUCKET = /^[A-Za-z0-9][A-Za-z0-9._-]{1,254}$/;

/** Parses an address; throws ERR_PENSTOCK_REMOTE_INVALID_URL saying what is wrong. */
export function parseRemoteUrl(text: string): RemoteAddress {
  const bad = (why: string) => new RemoteError('ERR_PENSTOCK_REMOTE_INVALID_URL', `Not a remote object address: ${why}`);
  if (typeof text !== 'string') throw bad('expected a string');
  const s3 = /^s3:\/\/([^/?#]*)\/?([^?#]*)$/i.exec(text);
  if (s3) {
    const bucket = s3[1]!;
    const key = s3[2]!;
    if (!BUCKET.test(bucket)) throw bad(`'${bucket}' is not a bucket name (s3://bucket/key)`);
    if (key.length === 0) throw bad(`s3://${bucket}/ names no object (s3://bucket/key)`);
    return { kind: 's3', bucket, key };
  }
  if (/^s3:/i.test(text)) throw bad('s3 addresses are s3://bucket/key, without a query or fragment');
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw bad(`'${redactText(text)}' does not parse as a URL`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw bad(`scheme ${url.protocol} (use s3://, http:// or https://)`);
  url.hash = '';
  const presigned = url.searchParams.has('X-Amz-Signature') || url.searchParams.has('Signature');
  return { kind: 'http', url, presigned };
}

/** Encodes an object key for a URL path: every byte but unreserved characters and `/`. */
export function encodeKey(key: string): string {
  return key
    .split('/')
    .map((seg) => encodeURIComponent(seg).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`))
    .join('/');
}

/** Where an S3 request goes. */
export interface S3Location {
  /** The region requests are signed for (e.g. `us-east-1`). */
  region: string;
  /** A custom endpoint (S3-compatible servers), e.g. `http://127.0.0.1:9000`. */
  endpoint?: string;
  /** `path` (endpoint/bucket/key), `virtual` (bucket.endpoint/key) or `auto` (chosen per bucket and endpoint). */
  addressing: S3Addressing;
}

/**
 * The request URL of an S3 object. `auto` means virtual-hosted on AWS (path-style where the
 * bucket name has dots, which TLS certificates for `*.s3.amazonaws.com` cannot cover) and
 * path-style on custom endpoints, which is what S3-compatible servers accept by default.
 */
export function s3ObjectUrl(bucket: string, key: string, where: S3Location): URL {
  const path = `/${encodeKey(key)}`;
  let base: URL;
  if (where.endpoint !== undefined) {
    try {
      base = new URL(where.endpoint);
    } catch {
      throw new RemoteError('ERR_PENSTOCK_REMOTE_INVALID_URL', `The S3 endpoint '${redactText(where.endpoint)}' is not a URL (e.g. http://127.0.0.1:9000)`);
    }
    if (base.protocol !== 'http:' && base.protocol !== 'https:')
      throw new RemoteError('ERR_PENSTOCK_REMOTE_INVALID_URL', `The S3 endpoint must be http:// or https://, got ${base.protocol}`);
  } else {
    base = new URL(`https://s3.${where.region}.amazonaws.com`);
  }
  const virtual = where.addressing === 'virtual' || (where.addressing === 'auto' && where.endpoint === undefined && !bucket.includes('.'));
  const prefix = base.pathname.replace(/\/+$/, '');
  const out = new URL(base.origin);
  if (virtual) {
    out.hostname = `${bucket}.${base.hostname}`;
    out.pathname = `${prefix}${path}`;
  } else {
    out.pathname = `${prefix}/${bucket}${path}`;
  }
  return out;
}

/** A URL without user info and query string (presigned signatures live there). */
export function redactUrl(url: URL): string {
  const host = url.host;
  return `${url.protocol}//${host}${url.pathname}${url.search ? '?…' : ''}`;
}

/** Best-effort redaction of a string that may or may not parse as a URL. */
export function redactText(text: string): string {
  try {
    return redactUrl(new URL(text));
  } catch {
    return text.replace(/\?.*$/s, '?…').replace(/\/\/[^/@]*@/, '//');
  }
}
