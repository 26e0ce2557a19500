/**
 * AWS Signature Version 4 for S3 requests, through the `aws4` library: signed headers for each
 * request, and presigned GET URLs.
 */
import aws4 from 'aws4';
import { resolveS3Config, type AwsCredentials, type S3Options } from './credentials.js';
import { RemoteError } from './errors.js';
import { parseRemoteUrl, s3ObjectUrl } from './url.js';

/** Headers for one signed S3 request (the given ones plus `Authorization`, `X-Amz-Date`, …). */
export function signS3Request(
  method: 'GET' | 'HEAD',
  url: URL,
  headers: Record<string, string>,
  credentials: AwsCredentials,
  region: string,
  now?: Date,
): Record<string, string> {
  const req = {
    method,
    host: url.hostname,
    path: `${url.pathname}${url.search}`,
    service: 's3',
    region,
    headers: { ...headers, Host: url.host, ...(now ? { 'X-Amz-Date': amzDate(now) } : {}) } as Record<string, string>,
  };
  aws4.sign(req, credentials);
  return req.headers;
}

/** Options of {@link presignS3Url}. */
export interface PresignOptions extends S3Options {
  /** Seconds the URL stays valid (default 3600, at most 604800 as S3 allows). */
  expiresIn?: number;
  /** The signing time (default now). */
  now?: Date;
}

/**
 * A presigned GET URL for `s3://bucket/key`, for handing to code that has no credentials; penstock
 * reads such URLs like any https:// object (the size comes from a 1-byte ranged GET, since a URL
 * presigned for GET cannot be used with HEAD).
 */
export function presignS3Url(s3Url: string, options: PresignOptions = {}): string {
  const addr = parseRemoteUrl(s3Url);
  if (addr.kind !== 's3') throw new RemoteError('ERR_PENSTOCK_REMOTE_INVALID_URL', 'presignS3Url takes an s3://bucket/key address');
  const expires = options.expiresIn ?? 3600;
  if (!Number.isInteger(expires) || expires < 1 || expires > 604800)
    throw new RemoteError('ERR_PENSTOCK_REMOTE_INVALID_URL', `expiresIn must be whole seconds from 1 to 604800, got ${expires}`);
  const cfg = resolveS3Config(options);
  if (!cfg.credentials) throw new RemoteError('ERR_PENSTOCK_REMOTE_NO_CREDENTIALS', 'Presigning needs credentials');
  const url = s3ObjectUrl(addr.bucket, addr.key, cfg);
  const query = new URLSearchParams(url.search);
  query.set('X-Amz-Expires', String(expires));
  if (options.now) query.set('X-Amz-Date', amzDate(options.now));
  const req = {
    method: 'GET',
    host: url.hostname,
    path: `${url.pathname}?${query.toString()}`,
    service: 's3',
    region: cfg.region,
    signQuery: true,
    headers: { Host: url.host } as Record<string, string>,
  };
  aws4.sign(req, cfg.credentials);
  return `${url.protocol}//${url.host}${req.path}`;
}

function amzDate(d: Date): string {
  return d.toISOString().replace(/[:-]|\.\d{3}/g, '');
}
