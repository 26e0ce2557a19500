/**
 * Outbound proxies, as `HTTPS_PROXY`, `HTTP_PROXY` and `NO_PROXY` (or their lower-case forms)
 * say: which proxy a URL goes through, if any; a CONNECT tunnel through it for https:// (the
 * proxy sees only the host and port, the TLS session is end to end); plain http:// requests are
 * sent to the proxy whole (absolute-form), as curl and browsers do, since many proxies allow
 * CONNECT to port 443 only. Settings are plain data, so worker threads take the main thread's.
 */
import type http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import tls from 'node:tls';
import type { Duplex } from 'node:stream';
import type { LookupFunction } from 'node:net';
import { RemoteError } from './errors.js';

/** Which proxies to use: the variables' values, as found. */
export interface ProxySettings {
  /** Proxy of http:// requests (`http_proxy`, else `HTTP_PROXY`). */
  http?: string;
  /** Proxy of https:// requests (`https_proxy`, else `HTTPS_PROXY`). */
  https?: string;
  /** Hosts reached directly (`no_proxy`, else `NO_PROXY`). */
  noProxy?: string;
}

/** The proxy variables of `env` (lower case first, as curl and most tools read them). */
export function proxySettingsFromEnv(env: NodeJS.ProcessEnv = process.env): ProxySettings {
  const pick = (name: string) => {
    const v = env[name.toLowerCase()] ?? env[name.toUpperCase()];
    return v === undefined || v.trim() === '' ? undefined : v.trim();
  };
  const out: ProxySettings = {};
  const http = pick('http_proxy');
  const secure = pick('https_proxy');
  const no = pick('no_proxy');
  if (http) out.http = http;
  if (secure) out.https = secure;
  if (no) out.noProxy = no;
  return out;
}

/** Whether `host` (and `port`) is one that NO_PROXY sends directly. */
export function bypassesProxy(host: string, port: number, noProxy: string | undefined): boolean {
  if (!noProxy) return false;
  const name = host.replace(/^\[|\]$/g, '').toLowerCase().replace(/\.$/, '');
  for (const raw of noProxy.split(/[\s,]+/)) {
    let entry = raw.trim().toLowerCase();
    if (entry === '') continue;
    if (entry === '*') return true;
    // An optional port: `host:8080`, `[::1]:8080`, `10.0.0.0/8` has none.
    let entryPort: number | undefined;
    const m = /^(\[[^\]]+\]|[^:]+):(\d+)$/.exec(entry);
    if (m) {
      entry = m[1]!;
      entryPort = Number(m[2]);
    }
    entry = entry.replace(/^\[|\]$/g, '');
    if (entryPort !== undefined && entryPort !== port) continue;
    if (entry.includes('/')) {
      if (inCidr(name, entry)) return true;
      continue;
    }
    if (net.isIP(entry)) {
      if (net.isIP(name) && sameAddress(name, entry)) return true;
      continue;
    }
    // `.example.com` and `*.example.com` cover the subdomains; `example.com` covers itself and them.
    const domain = entry.replace(/^\*?\./, '');
    if (name === domain || name.endsWith(`.${domain}`)) return true;
  }
  return false;
}

function sameAddress(a: string, b: string): boolean {
  const list = new net.BlockList();
  const type = net.isIP(b) === 6 ? 'ipv6' : 'ipv4';
  list.addAddress(b, type);
  return list.check(a, net.isIP(a) === 6 ? 'ipv6' : 'ipv4');
}

function inCidr(address: string, cidr: string): boolean {
  const [base, bits] = cidr.split('/');
  const kind = net.isIP(base ?? '');
  if (!kind || !net.isIP(address) || !/^\d+$/.test(bits ?? '')) return false;
  const list = new net.BlockList();
  try {
    list.addSubnet(base!, Number(bits), kind === 6 ? 'ipv6' : 'ipv4');
    return list.check(address, net.isIP(address) === 6 ? 'ipv6' : 'ipv4');
  } catch {
    return false;
  }
}

/** A proxy to go through: where it is, and its credentials as a Proxy-Authorization value. */
export interface Proxy {
  host: string;
  port: number;
  /** `Basic …` from the proxy URL's user info, if it has any. */
  authorization?: string;
  /** The proxy's address without user info, for messages. */
  shown: string;
}

/** The proxy `url` goes through under `settings`, or undefined to go directly. */
export function proxyFor(url: URL, settings: ProxySettings): Proxy | undefined {
  const secure = url.protocol === 'https:';
  const raw = secure ? settings.https : settings.http;
  if (raw === undefined) return undefined;
  const port = Number(url.port || (secure ? 443 : 80));
  if (bypassesProxy(url.hostname, port, settings.noProxy)) return undefined;
  let p: URL;
  try {
    // `host:port` without a scheme is common in these variables.
    p = new URL(/^[a-z][a-z0-9+.-]*:\/\//i.test(raw) ? raw : `http://${raw}`);
  } catch {
    throw new RemoteError('ERR_PENSTOCK_REMOTE_PROXY', `The ${secure ? 'HTTPS_PROXY' : 'HTTP_PROXY'} value is not a URL (e.g. http://proxy:3128)`);
  }
  if (p.protocol !== 'http:')
    throw new RemoteError('ERR_PENSTOCK_REMOTE_PROXY', `Proxies are reached over http:// (the proxy given is ${p.protocol}//${p.host})`);
  const out: Proxy = { host: p.hostname.replace(/^\[|\]$/g, ''), port: Number(p.port || 80), shown: `${p.protocol}//${p.host}` };
  if (p.username || p.password)
    out.authorization = `Basic ${Buffer.from(`${decodeURIComponent(p.username)}:${decodeURIComponent(p.password)}`).toString('base64')}`;
  return out;
}

/** A request in origin-form made one for a proxy: the full URL in its request line, and the proxy's credentials. */
export function absoluteForm(request: string, origin: string, authorization: string | undefined): string {
  const line = request.indexOf('\r\n');
  const [method, target, version] = request.slice(0, line).split(' ');
  const auth = authorization ? `\r\nProxy-Authorization: ${authorization}` : '';
  return `${method} ${origin}${target} ${version}${auth}${request.slice(line)}`;
}

/** The most bytes a proxy's answer to CONNECT may take. */
const MAX_CONNECT_HEAD = 16 * 1024;

/**
 * Opens a CONNECT tunnel to `host:port` through `proxy`; calls back with the socket once the proxy
 * answered 2xx (the tunnel then carries the TLS session), else with a RemoteError. The proxy's
 * refusal is reported with its status; nothing of the request beyond the host and port is sent.
 */
export function openTunnel(proxy: Proxy, host: string, port: number, lookup: LookupFunction | undefined, done: (err: Error | null, socket?: net.Socket) => void): net.Socket {
  const raw = net.connect({ host: proxy.host, port: proxy.port, ...(lookup ? { lookup } : {}) });
  const target = net.isIP(host) === 6 ? `[${host}]:${port}` : `${host}:${port}`;
  let head = '';
  let settled = false;
  const finish = (err: Error | null) => {
    if (settled) return;
    settled = true;
    raw.off('data', onData);
    raw.off('error', onError);
    raw.off('close', onClose);
    if (err) {
      raw.destroy();
      done(err);
    } else done(null, raw);
  };
  const onError = (e: NodeJS.ErrnoException) =>
    finish(new RemoteError('ERR_PENSTOCK_REMOTE_CONNECTION', `Connecting to the proxy ${proxy.shown} failed (${e.code ?? e.message})`, { cause: { code: e.code } }, true));
  const onClose = () => finish(new RemoteError('ERR_PENSTOCK_REMOTE_CONNECTION', `The proxy ${proxy.shown} closed the connection before answering CONNECT`, {}, true));
  const onData = (chunk: Buffer) => {
    head += chunk.toString('latin1');
    const end = head.indexOf('\r\n\r\n');
    if (end < 0) {
      if (head.length > MAX_CONNECT_HEAD) finish(new RemoteError('ERR_PENSTOCK_REMOTE_PROXY', `The proxy ${proxy.shown} sent an answer to CONNECT longer than ${MAX_CONNECT_HEAD} bytes`));
      return;
    }
    const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(head)?.[1] ?? 0);
    if (status < 200 || status > 299) {
      const why = status === 407 ? ': it wants credentials (put them in the proxy URL, http://user:password@proxy:port)' : '';
      return finish(new RemoteError('ERR_PENSTOCK_REMOTE_PROXY', `The proxy ${proxy.shown} refused to CONNECT to ${target} (${status || 'not HTTP'})${why}`, status ? { status } : {}, status === 502 || status === 503 || status === 504));
    }
    // The server speaks first only after our ClientHello: bytes past the head are a broken proxy.
    if (end + 4 !== head.length) return finish(new RemoteError('ERR_PENSTOCK_REMOTE_PROXY', `The proxy ${proxy.shown} sent bytes after its answer to CONNECT`));
    finish(null);
  };
  raw.on('data', onData);
  raw.on('error', onError);
  raw.on('close', onClose);
  raw.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n${proxy.authorization ? `Proxy-Authorization: ${proxy.authorization}\r\n` : ''}\r\n`, 'latin1');
  return raw;
}

/**
 * An https.Agent that tunnels through the proxy the settings name (NO_PROXY honoured per host),
 * for HTTP clients that take an agent: the AWS SDK's STS and SSO clients.
 */
class TunnelAgent extends https.Agent {
  readonly #settings: ProxySettings;

  constructor(settings: ProxySettings) {
    super({ keepAlive: true });
    this.#settings = settings;
  }

  override createConnection(given: http.RequestOptions, callback?: (err: Error | null, socket: Duplex) => void): Duplex | undefined {
    const options = given as tls.ConnectionOptions & { host?: string; port?: number };
    const host = options.host ?? 'localhost';
    const port = Number(options.port ?? 443);
    const proxy = proxyFor(new URL(`https://${net.isIP(host) === 6 ? `[${host}]` : host}:${port}/`), this.#settings);
    if (!proxy) return tls.connect(options);
    openTunnel(proxy, host, port, undefined, (err, raw) => {
      if (err || !raw) return callback?.(err ?? new Error('no tunnel'), undefined as unknown as Duplex);
      const servername = options.servername ?? (net.isIP(host) ? undefined : host);
      callback?.(null, tls.connect({ ...options, socket: raw, ...(servername ? { servername } : {}) }));
    });
    return undefined;
  }
}

/**
 * Agents for HTTP clients that take them (`{ httpsAgent }`), or undefined when no https proxy is
 * set. Only https:// goes through the proxy this way; the SDK's plain-http endpoints (instance
 * metadata, container credentials) are link-local and reached directly.
 */
export function proxyAgentsFor(settings: ProxySettings): { httpsAgent: https.Agent } | undefined {
  if (!settings.https) return undefined;
  return { httpsAgent: new TunnelAgent(settings) };
}
