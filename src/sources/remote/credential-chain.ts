/**
 * The AWS credential chain past static keys: SSO, `credential_process`, assumed roles, web
 * identity (EKS IRSA), container credentials (ECS task roles, EKS Pod Identity) and the EC2
 * instance metadata service (IMDSv2). These come from the AWS SDK's own providers
 * (`@aws-sdk/credential-provider-node`, an optional dependency), loaded only when the options,
 * the environment and the shared files hold no static keys, so the common case needs nothing
 * more than penstock itself.
 *
 * Credentials that expire are kept fresh: every range of a read asks {@link CredentialFeed} for
 * the current ones, which fetches new ones once fewer than five minutes are left (a read of a
 * large checkpoint may outlast the credentials it started with).
 */
import { RemoteError } from './errors.js';
import { resolveStaticS3Config, type AwsCredentials, type CredentialSource, type LookupPlaces, type S3Config, type S3Options } from './credentials.js';
import { proxyAgentsFor, proxySettingsFromEnv } from './proxy.js';

/** The optional package that holds the AWS SDK's credential chain. */
export const AWS_CREDENTIAL_PACKAGE = '@aws-sdk/credential-provider-node';

/** Credentials are renewed once fewer than this many milliseconds of them are left. */
const REFRESH_BEFORE_MS = 5 * 60 * 1000;

/** What the SDK's provider gives (a subset of its `AwsCredentialIdentity`). */
interface SdkCredentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
  expiration?: Date;
  $source?: Record<string, unknown>;
}
type SdkProvider = () => Promise<SdkCredentials>;
type SdkModule = { defaultProvider: (init: Record<string, unknown>) => SdkProvider };

let sdkOverride: (() => Promise<SdkModule>) | undefined;
let sdkLoaded: Promise<SdkModule | undefined> | undefined;

/**
 * @internal Replaces how the SDK module is loaded (tests: `() => Promise.reject(...)` stands for
 * an install without the optional package); `undefined` restores the real import.
 */
export function setCredentialModuleLoader(load: (() => Promise<SdkModule>) | undefined): void {
  sdkOverride = load;
  sdkLoaded = undefined;
  providers.clear();
}

function loadSdk(): Promise<SdkModule | undefined> {
  if (sdkLoaded) return sdkLoaded;
  // A name in a variable: the package is optional, so the compiler must not insist on it.
  const name: string = AWS_CREDENTIAL_PACKAGE;
  const loading = (sdkOverride ?? (() => import(name) as Promise<SdkModule>))().then(
    (m) => (typeof m?.defaultProvider === 'function' ? m : (m as unknown as { default?: SdkModule }).default),
    (e: unknown) => {
      const code = (e as { code?: string })?.code;
      if (code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND') return undefined;
      const why = String((e as Error)?.message ?? e).split('\n')[0]!.slice(0, 300);
      throw new RemoteError('ERR_PENSTOCK_REMOTE_SDK_MISSING', `${AWS_CREDENTIAL_PACKAGE} is installed but does not load (${why}): reinstall it`, { cause: e });
    },
  );
  // A failure is not kept: the next open tries again (the package may have been installed since).
  sdkLoaded = loading.then((m) => {
    if (!m) sdkLoaded = undefined;
    return m;
  }, (e: unknown) => {
    sdkLoaded = undefined;
    throw e;
  });
  return sdkLoaded;
}

/** The SDK's log lines are not penstock's to print (its warnings go to the console otherwise). */
const quietLogger = { trace() {}, debug() {}, info() {}, warn() {}, error() {} };

/** One SDK chain per profile and environment, so every object (each shard) shares its cache. */
const providers = new Map<string, SdkProvider>();

/** The variables that change what the SDK's chain finds. */
const CHAIN_VARIABLES = [
  'AWS_PROFILE', 'AWS_CONFIG_FILE', 'AWS_SHARED_CREDENTIALS_FILE', 'HOME', 'USERPROFILE', 'AWS_ROLE_ARN', 'AWS_ROLE_SESSION_NAME', 'AWS_WEB_IDENTITY_TOKEN_FILE',
  'AWS_CONTAINER_CREDENTIALS_FULL_URI', 'AWS_CONTAINER_CREDENTIALS_RELATIVE_URI', 'AWS_CONTAINER_AUTHORIZATION_TOKEN', 'AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE',
  'AWS_EC2_METADATA_DISABLED', 'AWS_EC2_METADATA_SERVICE_ENDPOINT', 'AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE', 'AWS_EC2_METADATA_V1_DISABLED',
  'AWS_ENDPOINT_URL', 'AWS_ENDPOINT_URL_STS', 'AWS_ENDPOINT_URL_SSO', 'AWS_REGION', 'AWS_DEFAULT_REGION',
  'HTTPS_PROXY', 'https_proxy', 'HTTP_PROXY', 'http_proxy', 'NO_PROXY', 'no_proxy',
];

function sdkProvider(sdk: SdkModule, profile: string | undefined): SdkProvider {
  const key = JSON.stringify([profile ?? null, ...CHAIN_VARIABLES.map((k) => process.env[k] ?? null)]);
  let p = providers.get(key);
  if (!p) {
    // STS and the SSO portal are on the internet: their requests take the proxy (instance
    // metadata and container endpoints are link-local, and the SDK reaches them directly).
    const agents = proxyAgentsFor(proxySettingsFromEnv());
    const clientConfig = agents ? { requestHandler: agents } : {};
    p = sdk.defaultProvider({ ...(profile ? { profile } : {}), logger: quietLogger, clientConfig, parentClientConfig: clientConfig });
    providers.set(key, p);
  }
  return p;
}

/** The label of credentials the SDK found (its own record of the provider, else the environment's hint). */
function sourceOf(c: SdkCredentials, env: NodeJS.ProcessEnv): CredentialSource {
  const features = Object.keys(c.$source ?? {});
  const has = (re: RegExp) => features.some((f) => re.test(f));
  if (has(/WEB_ID/)) return 'web-identity';
  if (has(/SSO/)) return 'sso';
  if (has(/PROCESS/)) return 'process';
  if (has(/ASSUME_ROLE|SOURCE_PROFILE|NAMED_PROVIDER/)) return 'assume-role';
  if (has(/^CREDENTIALS_HTTP$/)) return 'container';
  if (has(/ENV_VARS/)) return 'environment';
  if (features.length > 0) return 'aws-sdk';
  // The SDK's metadata providers leave no record: the environment says which one ran.
  return env.AWS_CONTAINER_CREDENTIALS_FULL_URI || env.AWS_CONTAINER_CREDENTIALS_RELATIVE_URI ? 'container' : 'instance-metadata';
}

/**
 * Where the environment or the profile points at a source only the SDK can use, its name: then a
 * missing SDK is named as the cause, and a failing source is reported as a failure, not as
 * "no credentials".
 */
function configuredSource(env: NodeJS.ProcessEnv, profileKeys: ReadonlySet<string>): string | undefined {
  const key = [...profileKeys].find((k) => /^(sso_|credential_process$|role_arn$|web_identity_token_file$|credential_source$|source_profile$|login_session$)/.test(k));
  if (key) return `the profile's ${key}`;
  if (env.AWS_WEB_IDENTITY_TOKEN_FILE) return 'AWS_WEB_IDENTITY_TOKEN_FILE';
  if (env.AWS_CONTAINER_CREDENTIALS_FULL_URI) return 'AWS_CONTAINER_CREDENTIALS_FULL_URI';
  if (env.AWS_CONTAINER_CREDENTIALS_RELATIVE_URI) return 'AWS_CONTAINER_CREDENTIALS_RELATIVE_URI';
  return undefined;
}

/**
 * The credentials of one object over its life: `current()` gives the ones to sign with now,
 * fetching new ones first when they are within five minutes of their expiry.
 */
export class CredentialFeed {
  #now: AwsCredentials;
  #pending: Promise<AwsCredentials> | undefined;
  readonly #fetch: () => Promise<AwsCredentials>;

  /** Starts from `first`; `fetch` gets new ones. */
  constructor(first: AwsCredentials, fetch: () => Promise<AwsCredentials>) {
    this.#now = first;
    this.#fetch = fetch;
  }

  /** Whether credentials expire (otherwise `current()` never fetches). */
  get expiring(): boolean {
    return this.#now.expiration !== undefined;
  }

  /** The credentials to sign with now. */
  async current(): Promise<AwsCredentials> {
    const exp = this.#now.expiration?.getTime();
    if (exp === undefined || exp - Date.now() > REFRESH_BEFORE_MS) return this.#now;
    this.#pending ??= this.#fetch().finally(() => {
      this.#pending = undefined;
    });
    try {
      this.#now = checked(await this.#pending, 'The credential source');
    } catch (e) {
      // Still valid for a while: keep them, and try again at the next range.
      if (exp > Date.now()) return this.#now;
      throw e;
    }
    return this.#now;
  }
}

function checked(c: AwsCredentials, from: string): AwsCredentials {
  if (typeof c?.accessKeyId !== 'string' || c.accessKeyId === '' || typeof c.secretAccessKey !== 'string' || c.secretAccessKey === '')
    throw new RemoteError('ERR_PENSTOCK_REMOTE_CREDENTIALS_FAILED', `${from} gave no accessKeyId and secretAccessKey`);
  const out: AwsCredentials = { accessKeyId: c.accessKeyId, secretAccessKey: c.secretAccessKey };
  if (c.sessionToken) out.sessionToken = c.sessionToken;
  if (c.expiration !== undefined) {
    const t = new Date(c.expiration as Date | string | number);
    if (!Number.isNaN(t.getTime())) out.expiration = t;
  }
  return out;
}

/** How to reach S3, with the credentials kept fresh when they expire. */
export interface S3Access {
  config: S3Config;
  /** Present when the credentials expire or come from a provider function. */
  feed?: CredentialFeed;
}

/**
 * Finds how to reach S3: {@link resolveStaticS3Config} (options, environment keys, static keys in
 * the shared files), else the AWS SDK's chain (SSO, `credential_process`, assumed roles, web
 * identity, container credentials, instance metadata).
 */
export async function resolveS3Access(options: S3Options = {}, places: LookupPlaces = {}): Promise<S3Access> {
  const env = places.env ?? process.env;
  const { config, lookedIn, profileKeys } = resolveStaticS3Config(options, places);
  if (typeof options.credentials === 'function') {
    const fn = options.credentials;
    const fetch = async () => checked(await fn(), 'The credentials function');
    config.credentials = await fetch();
    config.credentialSource = 'provider';
    return { config, feed: new CredentialFeed(config.credentials, fetch) };
  }
  if (config.credentials || options.anonymous) return { config };

  const configured = configuredSource(env, profileKeys);
  const sdk = await loadSdk();
  if (!sdk) {
    if (configured)
      throw new RemoteError('ERR_PENSTOCK_REMOTE_SDK_MISSING', `${configured} needs the AWS credential chain, in the optional package ${AWS_CREDENTIAL_PACKAGE}, which is not installed: npm install ${AWS_CREDENTIAL_PACKAGE}`);
    throw new RemoteError(
      'ERR_PENSTOCK_REMOTE_NO_CREDENTIALS',
      `No AWS credentials for s3:// (looked in ${lookedIn}; SSO, credential_process, web identity, container credentials and instance metadata need the optional package ${AWS_CREDENTIAL_PACKAGE}, not installed); set them, or open with { anonymous: true } for a public bucket`,
    );
  }
  const explicitProfile = options.profile?.trim() || undefined;
  const provider = sdkProvider(sdk, explicitProfile);
  const fetch = async () => checked(await provider(), 'The AWS credential chain');
  let first: SdkCredentials;
  try {
    first = await provider();
  } catch (e) {
    const why = String((e as Error)?.message ?? e).split('\n')[0]!.slice(0, 300);
    if (configured) throw new RemoteError('ERR_PENSTOCK_REMOTE_CREDENTIALS_FAILED', `${configured} gave no credentials: ${why}`, { cause: e });
    throw new RemoteError(
      'ERR_PENSTOCK_REMOTE_NO_CREDENTIALS',
      `No AWS credentials for s3:// (looked in ${lookedIn}, then SSO, credential_process, web identity, container credentials and instance metadata: ${why}); set them, or open with { anonymous: true } for a public bucket`,
      { cause: e },
    );
  }
  config.credentials = checked(first, 'The AWS credential chain');
  config.credentialSource = sourceOf(first, env);
  return config.credentials.expiration ? { config, feed: new CredentialFeed(config.credentials, fetch) } : { config };
}
