/**
 * Errors of remote reads. Messages name the object by its redacted address (no query string,
 * no user info) and never hold a credential.
 */
import { PenstockError } from '../../vocabulary/errors.js';

/** Every code a remote read can fail with, and what it means. */
export const REMOTE_ERROR_CODES = {
  ERR_PENSTOCK_REMOTE_INVALID_URL: 'The address is not an s3://, http:// or https:// URL penstock can read',
  ERR_PENSTOCK_REMOTE_NO_CREDENTIALS: 'An s3:// address, and no credentials in the options, the environment, the shared files or the rest of the AWS credential chain (and anonymous not asked for)',
  ERR_PENSTOCK_REMOTE_SDK_MISSING: 'The environment or the profile names a credential source (SSO, credential_process, a role, web identity, container credentials) that needs the optional package @aws-sdk/credential-provider-node, which is not installed',
  ERR_PENSTOCK_REMOTE_CREDENTIALS_FAILED: 'A credential source was found (SSO, credential_process, a role, web identity, container or instance metadata, a credentials function) but gave no credentials; the message says why',
  ERR_PENSTOCK_REMOTE_PROXY: 'The proxy (HTTPS_PROXY, HTTP_PROXY) is not a usable http:// URL, or refused the connection (407: it wants credentials)',
  ERR_PENSTOCK_REMOTE_BAD_CONFIG: 'The shared AWS credentials or config file names a profile that is missing or incomplete',
  ERR_PENSTOCK_REMOTE_NOT_FOUND: 'The server answered 404: no such bucket or object',
  ERR_PENSTOCK_REMOTE_ACCESS_DENIED: 'The server answered 401 or 403 (wrong key or secret, expired or tampered presigned URL, no permission)',
  ERR_PENSTOCK_REMOTE_REDIRECT: 'The server answered 301/302/307/308: the object lives elsewhere (another region or endpoint); the message says what to change',
  ERR_PENSTOCK_REMOTE_WRONG_REGION: 'The server refused the request for its region; the message names the region to use',
  ERR_PENSTOCK_REMOTE_HTTP: 'The server answered with an HTTP status that is not retried (another 4xx)',
  ERR_PENSTOCK_REMOTE_UNAVAILABLE: 'The server kept answering 429 or 5xx until the retries ran out',
  ERR_PENSTOCK_REMOTE_TIMEOUT: 'A request made no progress for remoteTimeoutMs, each time, until the retries ran out',
  ERR_PENSTOCK_REMOTE_TLS: 'The https:// server presented a certificate that is not trusted (the ca option adds a private CA)',
  ERR_PENSTOCK_REMOTE_CONNECTION: 'Connecting failed or the connection was reset, each time, until the retries ran out',
  ERR_PENSTOCK_REMOTE_RANGE_IGNORED: 'The server sent the whole object (200) where a range (206) was asked for',
  ERR_PENSTOCK_REMOTE_BAD_RANGE: 'The Content-Range of a response is missing, malformed or not the range asked for',
  ERR_PENSTOCK_REMOTE_SHORT_BODY: 'A body ended before the bytes its Content-Range promised, each time, until the retries ran out',
  ERR_PENSTOCK_REMOTE_LONG_BODY: 'A body held more bytes than its Content-Range said',
  ERR_PENSTOCK_REMOTE_CHANGED: 'The object changed during the read (its ETag, Last-Modified or size differed between answers, an answer came without the validator the object was opened with, or If-Match failed)',
  ERR_PENSTOCK_REMOTE_ENCODED: 'The server answered with a Content-Encoding (gzip, br, …) although penstock asks for the object\'s own bytes (Accept-Encoding: identity)',
  ERR_PENSTOCK_REMOTE_BAD_HEADER: 'A response header holds what penstock cannot use: an ETag with control characters, a byte count that is not a safe integer',
  ERR_PENSTOCK_REMOTE_NO_SIZE: 'The server told neither Content-Length nor Content-Range, so the object size is unknown',
  ERR_PENSTOCK_REMOTE_CLOSED: 'The remote object was closed',
} as const;

/** A remote error code. */
export type RemoteErrorCode = keyof typeof REMOTE_ERROR_CODES;

/** Details carried by a remote error (all safe to log). */
export interface RemoteErrorDetails {
  /** The object, redacted (no query string, no user info). */
  url?: string;
  /** The HTTP status of the answer that failed, when there was one. */
  status?: number;
  /** The server's own error code (S3's `<Code>`), when it sent one. */
  serverCode?: string;
  /** Requests made for the failing range, retries included. */
  attempts?: number;
  /** The region the server says the bucket is in (redirects and region errors). */
  region?: string;
  /** How long the server asked to wait before trying again (its Retry-After), in milliseconds. */
  retryAfterMs?: number;
  cause?: unknown;
}

/** An error reading a remote object. */
export class RemoteError extends PenstockError {
  /** The object, redacted. */
  readonly url?: string;
  /** The HTTP status of the answer that failed, when there was one. */
  readonly status?: number;
  /** The server's own error code (S3's `<Code>`), when it sent one. */
  readonly serverCode?: string;
  /** Requests made for the failing range, retries included. */
  readonly attempts?: number;
  /** The region the server says the bucket is in (redirects and region errors). */
  readonly region?: string;
  /** How long the server asked to wait before trying again (its Retry-After), in milliseconds. */
  readonly retryAfterMs?: number;
  /** Whether another attempt may succeed (429, 5xx, timeouts, resets, short bodies). */
  readonly transient: boolean;

  readonly #base: string;
  readonly #details: RemoteErrorDetails;

  /** An error with a remote error code, its message, the details to carry and whether retrying may help. */
  constructor(code: RemoteErrorCode, message: string, details: RemoteErrorDetails = {}, transient = false) {
    const attempts = details.attempts !== undefined && details.attempts > 1 ? ` after ${details.attempts} attempts` : '';
    super(code, `${message}${attempts}${details.url ? ` (${details.url})` : ''}`, details.cause !== undefined ? { cause: details.cause } : undefined);
    this.name = 'RemoteError';
    this.transient = transient;
    this.#base = message;
    this.#details = details;
    if (details.url !== undefined) this.url = details.url;
    if (details.status !== undefined) this.status = details.status;
    if (details.serverCode !== undefined) this.serverCode = details.serverCode;
    if (details.attempts !== undefined) this.attempts = details.attempts;
    if (details.region !== undefined) this.region = details.region;
    if (details.retryAfterMs !== undefined) this.retryAfterMs = details.retryAfterMs;
  }

  /** The message without the attempts and the address (to carry the error across threads). */
  get baseMessage(): string {
    return this.#base;
  }

  /** The same error, noting how many requests were made for the range. */
  withAttempts(attempts: number): RemoteError {
    return new RemoteError(this.code as RemoteErrorCode, this.#base, { ...this.#details, attempts }, this.transient);
  }
}
