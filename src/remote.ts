/**
 * `penstock/remote`: `s3://` and `http(s)://` objects opened for parallel ranged reads into host or
 * GPU memory, S3 credentials and presigned URLs, and the remote counters. `loadTensors` reads URLs
 * without this entry point.
 *
 * @packageDocumentation
 */
export { openRemote, type RemoteObject, type OpenRemoteOptions, type RemoteInfo } from './sources/remote/source.js';
export { openSource } from './sources/open-source.js';
export { presignS3Url, type PresignOptions } from './sources/remote/signing.js';
export { resolveS3Config, type AwsCredentials, type AwsCredentialProvider, type CredentialSource, type S3Config, type S3Options } from './sources/remote/credentials.js';
export { isRemoteUrl, parseRemoteUrl, type RemoteAddress, type S3Addressing, type S3Location } from './sources/remote/url.js';
export type { RemoteSettings } from './sources/remote/settings.js';
export { remoteStats, resetRemoteStats, REMOTE_ROUTES, type RemoteRoute, type RemoteRouteCounters, type RemoteStatsSnapshot } from './sources/remote/stats.js';
