/**
 * AWS credentials, region, endpoint and addressing, found the way the AWS tools find them: the
 * options, then the environment, then the shared credentials and config files (with profiles).
 * Here the static part, which needs nothing but the files and variables; the sources that need
 * requests or programs (SSO, credential_process, roles, metadata services) are in
 * credential-chain.ts.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { RemoteError } from './errors.js';
import type { S3Addressing, S3Location } from './url.js';

/** An access key pair, with a session token for temporary credentials. */
export interface AwsCredentials {
  /** The access key id (`AWS_ACCESS_KEY_ID`, `aws_access_key_id`). */
  accessKeyId: string;
  /** The secret access key (`AWS_SECRET_ACCESS_KEY`, `aws_secret_access_key`). */
  secretAccessKey: string;
  /** The session token of temporary credentials (`AWS_SESSION_TOKEN`); absent for long-term keys. */
  sessionToken?: string;
  /** When temporary credentials stop working; penstock gets new ones five minutes before. */
  expiration?: Date;
}

/** A function that gives credentials (called again when the last ones near their `expiration`). */
export type AwsCredentialProvider = () => Promise<AwsCredentials>;

/** What decides how an `s3://` object is reached. */
export interface S3Options {
  /**
   * Credentials to use instead of looking them up: keys, or a function that gives them (such as
   * one of the AWS SDK's providers), called again before the last ones expire.
   */
  credentials?: AwsCredentials | AwsCredentialProvider;
  /**
   * Sign nothing and look up no credentials (public buckets). Without credentials and without
   * this, opening fails.
   */
  anonymous?: boolean;
  /** Profile of the shared files (default `AWS_PROFILE`, else `default`). */
  profile?: string;
  /** Region (default `AWS_REGION`, `AWS_DEFAULT_REGION`, the profile's `region`, else `us-east-1`). */
  region?: string;
  /** Custom endpoint (default `AWS_ENDPOINT_URL_S3`, `AWS_ENDPOINT_URL`, the profile's `endpoint_url`). */
  endpoint?: string;
  /** `path`, `virtual` or `auto` (default: the profile's `s3.addressing_style`, else `auto`). */
  addressing?: S3Addressing;
}

/**
 * Where the credentials came from (never the credentials themselves): the `credentials` option
 * (keys, or `provider` for a function), static keys in the environment or the shared files, or
 * through the AWS SDK's chain: `sso`, `process` (`credential_process`), `assume-role`,
 * `web-identity` (EKS IRSA), `container` (ECS task roles, EKS Pod Identity),
 * `instance-metadata` (EC2), `aws-sdk` (another of its providers).
 */
export type CredentialSource =
  | 'options' | 'provider' | 'environment' | 'shared-credentials-file' | 'config-file' | 'anonymous'
  | 'sso' | 'process' | 'assume-role' | 'web-identity' | 'container' | 'instance-metadata' | 'aws-sdk';

/** The resolved way to reach S3. */
export interface S3Config extends S3Location {
  /** The credentials requests are signed with; absent when anonymous. */
  credentials?: AwsCredentials;
  /** Where the credentials came from. */
  credentialSource: CredentialSource;
  /** The profile of the shared files that was used: the one given, else `AWS_PROFILE`, else `default`. */
  profile: string;
}

/** A parsed INI file: section → key → value; nested `s3 =` blocks become `s3.key`. */
export type IniSections = Map<string, Map<string, string>>;

/** Parses the AWS shared-file dialect of INI (comments `#`/`;`, nested indented sub-keys). */
export function parseIni(text: string): IniSections {
  const out: IniSections = new Map();
  let section: Map<string, string> | undefined;
  let parent: string | undefined;
  for (const raw of text.split(/\r?\n/)) {
    if (/^\s*([#;].*)?$/.test(raw)) continue;
    const head = /^\s*\[([^\]]+)\]\s*$/.exec(raw);
    if (head) {
      const name = head[1]!.trim().replace(/\s+/g, ' ');
      section = out.get(name) ?? new Map();
      out.set(name, section);
      parent = undefined;
      continue;
    }
    const kv = /^(\s*)([^=\s][^=]*?)\s*=\s*(.*?)\s*$/.exec(raw);
    if (!kv || !section) continue;
    const indented = kv[1]!.length > 0;
    const key = kv[2]!.toLowerCase();
    const value = kv[3]!;
    if (indented && parent !== undefined) {
      section.set(`${parent}.${key}`, value);
    } else if (value === '') {
      parent = key;
    } else {
      parent = undefined;
      section.set(key, value);
    }
  }
  return out;
}

function readIni(file: string): IniSections | undefined {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
  return parseIni(text);
}

/** The files and variables to look in (overridable for tests). */
export interface LookupPlaces {
  env?: NodeJS.ProcessEnv;
  home?: string;
}

function nonEmpty(v: string | undefined): string | undefined {
  return v === undefined || v.trim() === '' ? undefined : v.trim();
}

/** What the static lookup found, and where it looked (for messages). */
export interface StaticS3Lookup {
  /** Credentials absent when none were found (or anonymous was asked for). */
  config: S3Config;
  /** The places looked in, for a message. */
  lookedIn: string;
  /** The keys of the profile's sections in both files (to tell which other source it names). */
  profileKeys: ReadonlySet<string>;
}

/**
 * Region, endpoint, addressing and the static credentials: the `credentials` option (keys), the
 * environment's keys, then the profile's keys in the shared credentials file, then in the config
 * file. Finds no credentials without failing (the chain may look further).
 */
export function resolveStaticS3Config(options: S3Options = {}, places: LookupPlaces = {}): StaticS3Lookup {
  const env = places.env ?? process.env;
  const home = places.home ?? os.homedir();
  const explicitProfile = nonEmpty(options.profile) ?? nonEmpty(env.AWS_PROFILE);
  const profile = explicitProfile ?? 'default';
  const credFile = nonEmpty(env.AWS_SHARED_CREDENTIALS_FILE) ?? path.join(home, '.aws', 'credentials');
  const configFile = nonEmpty(env.AWS_CONFIG_FILE) ?? path.join(home, '.aws', 'config');
  const creds = readIni(credFile)?.get(profile);
  const config = readIni(configFile)?.get(profile === 'default' ? 'default' : `profile ${profile}`);
  const lookedIn = `AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, ${credFile} and ${configFile}, profile '${profile}'`;
  const profileKeys = new Set([...(creds?.keys() ?? []), ...(config?.keys() ?? [])]);

  const region = nonEmpty(options.region) ?? nonEmpty(env.AWS_REGION) ?? nonEmpty(env.AWS_DEFAULT_REGION) ?? nonEmpty(config?.get('region')) ?? 'us-east-1';
  const endpoint =
    nonEmpty(options.endpoint) ?? nonEmpty(env.AWS_ENDPOINT_URL_S3) ?? nonEmpty(env.AWS_ENDPOINT_URL) ??
    nonEmpty(config?.get('s3.endpoint_url')) ?? nonEmpty(config?.get('endpoint_url'));
  const style = options.addressing ?? nonEmpty(config?.get('s3.addressing_style'));
  if (style !== undefined && !['path', 'virtual', 'auto'].includes(style))
    throw new RemoteError('ERR_PENSTOCK_REMOTE_BAD_CONFIG', `S3 addressing must be path, virtual or auto, got '${style}'`);
  const out: S3Config = { region, addressing: (style ?? 'auto') as S3Addressing, credentialSource: 'anonymous', profile };
  if (endpoint !== undefined) out.endpoint = endpoint;
  const result = { config: out, lookedIn, profileKeys };

  if (options.anonymous || typeof options.credentials === 'function') return result;
  const pick = (c: AwsCredentials | undefined, source: CredentialSource): StaticS3Lookup | undefined => {
    if (!c) return undefined;
    out.credentials = c;
    out.credentialSource = source;
    return result;
  };
  if (options.credentials) {
    const c = options.credentials;
    if (!nonEmpty(c.accessKeyId) || !nonEmpty(c.secretAccessKey))
      throw new RemoteError('ERR_PENSTOCK_REMOTE_NO_CREDENTIALS', 'credentials need both accessKeyId and secretAccessKey');
    return pick(c, 'options')!;
  }
  // As the AWS tools do: a profile named explicitly wins over keys in the environment.
  if (explicitProfile === undefined) {
    const found = pick(fromPairs(env.AWS_ACCESS_KEY_ID, env.AWS_SECRET_ACCESS_KEY, env.AWS_SESSION_TOKEN, 'AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY'), 'environment');
    if (found) return found;
  }
  const fromFile = (s: Map<string, string> | undefined, file: string) =>
    s && fromPairs(s.get('aws_access_key_id'), s.get('aws_secret_access_key'), s.get('aws_session_token'), `aws_access_key_id and aws_secret_access_key in profile '${profile}' of ${file}`);
  const found = pick(fromFile(creds, credFile), 'shared-credentials-file') ?? pick(fromFile(config, configFile), 'config-file');
  if (found) return found;
  if (explicitProfile !== undefined && !creds && !config)
    throw new RemoteError('ERR_PENSTOCK_REMOTE_BAD_CONFIG', `The AWS profile '${profile}' is in neither ${credFile} nor ${configFile}`);
  return result;
}

/**
 * Resolves credentials, region, endpoint and addressing for `s3://` objects from static keys
 * only (the options, the environment, the shared files); no request is made. Opening an object
 * looks further (SSO, credential_process, roles, metadata services) when these hold none.
 */
export function resolveS3Config(options: S3Options = {}, places: LookupPlaces = {}): S3Config {
  if (typeof options.credentials === 'function')
    throw new RemoteError('ERR_PENSTOCK_REMOTE_BAD_CONFIG', 'A credentials function gives credentials asynchronously: resolveS3Config and presignS3Url take keys');
  const { config, lookedIn } = resolveStaticS3Config(options, places);
  if (config.credentials || options.anonymous) return config;
  throw new RemoteError(
    'ERR_PENSTOCK_REMOTE_NO_CREDENTIALS',
    `No AWS credentials for s3:// (looked in ${lookedIn}); set them, or open with { anonymous: true } for a public bucket`,
  );
}

function fromPairs(id: string | undefined, secret: string | undefined, token: string | undefined, what: string): AwsCredentials | undefined {
  const a = nonEmpty(id);
  const s = nonEmpty(secret);
  if (!a && !s) return undefined;
  if (!a || !s) throw new RemoteError('ERR_PENSTOCK_REMOTE_BAD_CONFIG', `Only half of a key pair is set: ${what} must both be set`);
  const c: AwsCredentials = { accessKeyId: a, secretAccessKey: s };
  const t = nonEmpty(token);
  if (t) c.sessionToken = t;
  return c;
}
