/**
 * How to build each request for an object, as plain data, so that the same requests can be made
 * on the main thread or in a worker thread.
 */
import type { AwsCredentials } from './credentials.js';
import type { RangeRequest } from './http.js';
import { signS3Request } from './signing.js';

/** The request URL, and what each request carries: a SigV4 signature, or fixed extra headers. */
export interface RequestSpec {
  url: string;
  /** Sign each request (s3:// with credentials). */
  s3?: { credentials: AwsCredentials; region: string };
  /** Extra headers of every request (http(s)://). */
  headers?: Record<string, string>;
}

/** The request for `[start, end)` (both undefined: the whole object, for HEAD). */
export function buildRequest(spec: RequestSpec, start: number | undefined, end: number | undefined, method: 'GET' | 'HEAD' = 'GET'): RangeRequest {
  const url = new URL(spec.url);
  return {
    method, url, start, end,
    headers: (range) => {
      const h: Record<string, string> = { ...(spec.headers ?? {}), ...(range ? { Range: range } : {}) };
      return spec.s3 ? signS3Request(method, url, h, spec.s3.credentials, spec.s3.region) : h;
    },
  };
}
