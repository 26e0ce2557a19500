/**
 * Remote objects (S3 and HTTP(S)) read in parallel ranges into host or GPU memory.
 */
export { openRemote, RemoteObject, type OpenRemoteOptions, type RemoteInfo } from './source.js';
export { presignS3Url, type PresignOptions } from './signing.js';
export { resolveS3Config, type AwsCredentials, type AwsCredentialProvider, type CredentialSource, type S3Config, type S3Options } from './credentials.js';
export { isRemoteUrl, parseRemoteUrl, type RemoteAddress, type S3Addressing, type S3Location } from './url.js';
export { RemoteError, REMOTE_ERROR_CODES, type RemoteErrorCode } from './errors.js';
export { type RemoteSettings } from './settings.js';
export { remoteStats, resetRemoteStats, REMOTE_ROUTES, type RemoteRoute, type RemoteRouteCounters, type RemoteStatsSnapshot } from './stats.js';
export { openSource, type ReadSource } from '../open-source.js';
export type { Source, SourceRecord } from '../source.js';
