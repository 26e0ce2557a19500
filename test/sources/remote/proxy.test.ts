/**
 * Proxies from HTTPS_PROXY, HTTP_PROXY and NO_PROXY (and their lower-case forms): a local proxy
 * on 127.0.0.1 that counts what goes through it (CONNECT tunnels for https://, absolute-form
 * requests for http://), with and without credentials; NO_PROXY sending hosts around it; worker
 * threads taking the same way; s3:// signed through it; the AWS SDK's STS calls tunnelled.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { RemoteError } from '../../../src/index.js';
import { openRemote } from '../../../src/remote.js';
import { bypassesProxy, proxyAgentsFor, proxyFor, proxySettingsFromEnv } from '../../../src/sources/remote/proxy.js';
import { pattern, repoRoot, tmpDir, withEnv } from '../../helpers.js';
import { RangeServer } from '../../remote-range-server.js';
import { S3RVER_CREDENTIALS, startS3rver, type S3Server } from './s3rver.js';

const tlsDir = path.join(repoRoot, 'test/fixtures/tls');
const cert = fs.readFileSync(path.join(tlsDir, 'cert.pem'), 'utf8');
const plain = new RangeServer();
const secure = new RangeServer({ tls: { key: fs.readFileSync(path.join(tlsDir, 'key.pem'), 'utf8'), cert } });
const data = pattern(300 * 1024 + 5, 61);
const small = { remoteRangeSize: 64 * 1024, remoteRetryBaseMs: 1, remoteRetries: 0 };
let s3: S3Server;

/** A forward proxy that counts: CONNECT tunnels and absolute-form requests, optionally wanting Basic credentials. */
class CountingProxy {
  readonly server: http.Server;
  tunnels: string[] = [];
  forwarded: string[] = [];
  refused = 0;
  auth: string | undefined;
  readonly #sockets = new Set<net.Socket>();

  constructor() {
    this.server = http.createServer((req, res) => {
      if (!this.#allowed(req.headers['proxy-authorization'])) {
        this.refused++;
        res.writeHead(407, { 'proxy-authenticate': 'Basic realm="p"', 'content-length': '0' });
        return res.end();
      }
      this.forwarded.push(req.url!);
      const target = new URL(req.url!);
      const headers = { ...req.headers };
      delete headers['proxy-authorization'];
      const out = http.request({ host: target.hostname, port: target.port, path: `${target.pathname}${target.search}`, method: req.method, headers }, (up) => {
        res.writeHead(up.statusCode!, up.headers);
        up.pipe(res);
      });
      out.on('error', () => res.destroy());
      req.pipe(out);
    });
    this.server.on('connect', (req: http.IncomingMessage, client: net.Socket, head: Buffer) => {
      this.#sockets.add(client);
      if (!this.#allowed(req.headers['proxy-authorization'])) {
        this.refused++;
        return client.end('HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm="p"\r\nContent-Length: 0\r\n\r\n');
      }
      this.tunnels.push(req.url!);
      const [host, port] = [req.url!.slice(0, req.url!.lastIndexOf(':')), Number(req.url!.slice(req.url!.lastIndexOf(':') + 1))];
      const up = net.connect(port, host, () => {
        client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
        if (head.length) up.write(head);
        up.pipe(client);
        client.pipe(up);
      });
      up.on('error', () => client.destroy());
      client.on('error', () => up.destroy());
    });
    this.server.on('connection', (s: net.Socket) => {
      this.#sockets.add(s);
      s.on('close', () => this.#sockets.delete(s));
    });
  }

  #allowed(given: string | undefined): boolean {
    return this.auth === undefined || given === `Basic ${Buffer.from(this.auth).toString('base64')}`;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as net.AddressInfo).port}`;
  }

  reset(): void {
    this.tunnels = [];
    this.forwarded = [];
    this.refused = 0;
    this.auth = undefined;
    // Connections kept alive from an earlier test would carry on without a new CONNECT.
    for (const s of this.#sockets) s.destroy();
  }

  async start(): Promise<void> {
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
  }

  async stop(): Promise<void> {
    for (const s of this.#sockets) s.destroy();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}

const proxy = new CountingProxy();
const noProxyVars = { HTTP_PROXY: undefined, http_proxy: undefined, HTTPS_PROXY: undefined, https_proxy: undefined, NO_PROXY: undefined, no_proxy: undefined };

before(async () => {
  await Promise.all([plain.start(), secure.start(), proxy.start()]);
  plain.put('/object', data);
  secure.put('/object', data);
  s3 = await startS3rver(['models']);
  await s3.put('models', 'weights', data);
});
after(async () => {
  await Promise.all([plain.stop(), secure.stop(), proxy.stop(), s3.stop()]);
});

async function readVia(url: string, env: Record<string, string | undefined>, options: Parameters<typeof openRemote>[1] = {}): Promise<number> {
  return withEnv({ ...noProxyVars, ...env }, async () => {
    await using obj = await openRemote(url, { ...small, remoteWorkers: 0, ...options });
    const workers = typeof options.remoteWorkers === 'number' && options.remoteWorkers > 0;
    const out = workers ? new Uint8Array(new SharedArrayBuffer(data.length)) : Buffer.alloc(data.length);
    assert.equal(await obj.read(out), data.length);
    assert.ok(Buffer.from(out.buffer, out.byteOffset, out.length).equals(data));
    return obj.stats().routes['remote-host'].requests;
  });
}

describe('proxies for remote reads', () => {
  for (const remoteWorkers of [0, 2]) {
    const w = remoteWorkers ? ' (worker threads)' : '';
    it(`http:// goes to HTTP_PROXY as absolute-form requests, every one${w}`, async () => {
      proxy.reset();
      plain.reset();
      plain.put('/object', data);
      await readVia(plain.url(), { HTTP_PROXY: proxy.url }, { remoteWorkers });
      assert.ok(proxy.forwarded.length >= Math.ceil(data.length / (64 * 1024)) + 1, String(proxy.forwarded.length));
      // Every request the server saw came through the proxy.
      assert.equal(plain.requests.length, proxy.forwarded.length);
      for (const u of proxy.forwarded) assert.equal(u, plain.url());
      assert.equal(proxy.tunnels.length, 0);
    });

    it(`https:// goes through a CONNECT tunnel to HTTPS_PROXY, TLS end to end${w}`, async () => {
      proxy.reset();
      secure.reset();
      secure.put('/object', data);
      const before = secure.connections;
      await readVia(secure.url(), { HTTPS_PROXY: proxy.url }, { ca: cert, remoteWorkers });
      assert.ok(proxy.tunnels.length >= 1);
      for (const t of proxy.tunnels) assert.equal(t, `127.0.0.1:${secure.port}`);
      assert.equal(secure.connections - before, proxy.tunnels.length);
      assert.equal(proxy.forwarded.length, 0);
    });
  }

  it('lower-case variables win over upper-case ones', async () => {
    proxy.reset();
    // The upper-case ones point at a port nobody listens on: using them would fail.
    await readVia(plain.url(), { http_proxy: proxy.url, HTTP_PROXY: 'http://127.0.0.1:9' });
    await readVia(secure.url(), { https_proxy: proxy.url, HTTPS_PROXY: 'http://127.0.0.1:9' }, { ca: cert });
    assert.ok(proxy.forwarded.length > 0 && proxy.tunnels.length > 0);
  });

  it('NO_PROXY (or no_proxy) sends matching hosts around the proxy', async () => {
    proxy.reset();
    for (const no of [{ NO_PROXY: '127.0.0.1' }, { no_proxy: 'localhost, 127.0.0.0/8' }, { NO_PROXY: `127.0.0.1:${plain.port}` }]) {
      await readVia(plain.url(), { HTTP_PROXY: proxy.url, ...no });
    }
    await readVia(secure.url(), { HTTPS_PROXY: proxy.url, NO_PROXY: '*' }, { ca: cert });
    assert.deepEqual([proxy.forwarded.length, proxy.tunnels.length], [0, 0]);
    // Another port than the one listed is not covered.
    await readVia(plain.url(), { HTTP_PROXY: proxy.url, NO_PROXY: '127.0.0.1:1' });
    assert.ok(proxy.forwarded.length > 0);
  });

  it('a proxy that wants credentials: refused without them (ERR_PENSTOCK_REMOTE_PROXY), served with them in its URL', async () => {
    proxy.reset();
    proxy.auth = 'user:p@ss word';
    for (const [url, env, options] of [
      [plain.url(), { HTTP_PROXY: proxy.url }, {}],
      [secure.url(), { HTTPS_PROXY: proxy.url }, { ca: cert }],
    ] as const) {
      const err = await readVia(url, env, options).catch((e: unknown) => e);
      assert.ok(err instanceof RemoteError, String(err));
      assert.equal(err.code, 'ERR_PENSTOCK_REMOTE_PROXY');
      assert.match(err.message, /credentials/);
    }
    assert.ok(proxy.refused >= 2);
    const withAuth = proxy.url.replace('http://', `http://user:${encodeURIComponent('p@ss word')}@`);
    await readVia(plain.url(), { HTTP_PROXY: withAuth });
    await readVia(secure.url(), { HTTPS_PROXY: withAuth }, { ca: cert });
    assert.ok(proxy.forwarded.length > 0 && proxy.tunnels.length > 0);
    // The proxy's credentials never reach the server.
    assert.ok(plain.requests.every((r) => r.headers['proxy-authorization'] === undefined));
  });

  it('a proxy URL penstock cannot use is ERR_PENSTOCK_REMOTE_PROXY, not retried', async () => {
    await assert.rejects(readVia(secure.url(), { HTTPS_PROXY: 'socks5://127.0.0.1:1080' }, { ca: cert, remoteRetries: 3 }), (e: RemoteError) => {
      assert.equal(e.code, 'ERR_PENSTOCK_REMOTE_PROXY');
      assert.equal(e.attempts, undefined);
      return true;
    });
  });

  it('a proxy that is down fails as a connection error naming the proxy', async () => {
    const err = await readVia(secure.url(), { HTTPS_PROXY: 'http://127.0.0.1:9' }, { ca: cert }).catch((e: unknown) => e);
    assert.ok(err instanceof RemoteError);
    assert.equal(err.code, 'ERR_PENSTOCK_REMOTE_CONNECTION');
    assert.match(err.message, /proxy http:\/\/127\.0\.0\.1:9/);
  });

  it('s3:// requests are signed for the bucket and sent through the proxy', async () => {
    proxy.reset();
    const env = { HTTP_PROXY: proxy.url, AWS_ACCESS_KEY_ID: S3RVER_CREDENTIALS.accessKeyId, AWS_SECRET_ACCESS_KEY: S3RVER_CREDENTIALS.secretAccessKey, AWS_PROFILE: undefined };
    await readVia('s3://models/weights', env, { endpoint: s3.endpoint });
    assert.ok(proxy.forwarded.length >= 2);
    for (const u of proxy.forwarded) assert.match(u, /^http:\/\/127\.0\.0\.1:\d+\/models\/weights$/);
  });

  it('the AWS SDK’s STS calls (web identity) are tunnelled through HTTPS_PROXY', async () => {
    proxy.reset();
    const tokenFile = path.join(tmpDir(), 'proxy-irsa-token');
    fs.writeFileSync(tokenFile, 'token');
    const home = path.join(tmpDir(), 'proxy-home');
    fs.mkdirSync(home, { recursive: true });
    const env = {
      HOME: home, AWS_SHARED_CREDENTIALS_FILE: path.join(home, 'none'), AWS_CONFIG_FILE: path.join(home, 'none'), AWS_ACCESS_KEY_ID: undefined, AWS_SECRET_ACCESS_KEY: undefined, AWS_PROFILE: undefined,
      AWS_REGION: 'us-east-1', AWS_WEB_IDENTITY_TOKEN_FILE: tokenFile, AWS_ROLE_ARN: 'arn:aws:iam::123456789012:role/r', AWS_ENDPOINT_URL_STS: 'https://127.0.0.1:9',
      HTTPS_PROXY: proxy.url,
    };
    // Nothing listens behind the proxy: the failure is the source's; the tunnel was asked for.
    await assert.rejects(withEnv({ ...noProxyVars, ...env }, () => openRemote('s3://models/weights', { endpoint: s3.endpoint })), { code: 'ERR_PENSTOCK_REMOTE_CREDENTIALS_FAILED' });
    assert.ok(proxy.tunnels.includes('127.0.0.1:9'), JSON.stringify(proxy.tunnels));
  });
});

describe('proxy settings', () => {
  it('reads the variables lower case first', () => {
    assert.deepEqual(proxySettingsFromEnv({ HTTPS_PROXY: 'http://a:1', https_proxy: 'http://b:1', HTTP_PROXY: 'http://c:1', NO_PROXY: 'x' }), { https: 'http://b:1', http: 'http://c:1', noProxy: 'x' });
    assert.deepEqual(proxySettingsFromEnv({ HTTPS_PROXY: ' ', no_proxy: '' }), {});
  });

  it('NO_PROXY matches hosts, domains and their subdomains, ports, addresses and CIDR blocks', () => {
    const no = 'example.com, .corp.internal *.svc.local,10.0.0.0/8 ,[::1]:8080, 192.168.1.5';
    const cases: [string, number, boolean][] = [
      ['example.com', 443, true], ['s3.example.com', 443, true], ['notexample.com', 443, false],
      ['a.corp.internal', 80, true], ['corp.internal', 80, true], ['x.svc.local', 443, true],
      ['10.1.2.3', 80, true], ['11.1.2.3', 80, false], ['::1', 8080, true], ['[::1]', 8080, true], ['::1', 80, false],
      ['192.168.1.5', 9000, true], ['192.168.1.6', 9000, false], ['EXAMPLE.COM.', 80, true],
    ];
    for (const [host, port, want] of cases) assert.equal(bypassesProxy(host, port, no), want, `${host}:${port}`);
    assert.equal(bypassesProxy('anything', 1, '*'), true);
    assert.equal(bypassesProxy('anything', 1, undefined), false);
  });

  it('proxy URLs: a bare host:port is http://, credentials become Proxy-Authorization, other schemes are refused', () => {
    const p = proxyFor(new URL('https://s3.amazonaws.com/b/k'), { https: 'u:pw@proxy.corp:3128' })!;
    assert.deepEqual([p.host, p.port, p.shown], ['proxy.corp', 3128, 'http://proxy.corp:3128']);
    assert.equal(p.authorization, `Basic ${Buffer.from('u:pw').toString('base64')}`);
    assert.equal(proxyFor(new URL('http://h/x'), { https: 'http://p:1' }), undefined);
    assert.throws(() => proxyFor(new URL('https://h/x'), { https: 'socks5://p:1' }), { code: 'ERR_PENSTOCK_REMOTE_PROXY' });
    assert.throws(() => proxyFor(new URL('https://h/x'), { https: 'http://[bad' }), { code: 'ERR_PENSTOCK_REMOTE_PROXY' });
    // The message shows the proxy without its credentials.
    try {
      proxyFor(new URL('https://h/x'), { https: 'https://user:secret@p:1' });
      assert.fail('accepted');
    } catch (e) {
      assert.ok(!String((e as Error).message).includes('secret'));
    }
  });

  it('the https agent handed to HTTP clients tunnels, and goes direct for NO_PROXY hosts', async () => {
    proxy.reset();
    const get = (agent: https.Agent) =>
      new Promise<Buffer>((resolve, reject) => {
        https.get(secure.url(), { agent, ca: cert }, (res) => {
          const parts: Buffer[] = [];
          res.on('data', (c: Buffer) => parts.push(c));
          res.on('end', () => resolve(Buffer.concat(parts)));
        }).on('error', reject);
      });
    const through = proxyAgentsFor({ https: proxy.url })!.httpsAgent;
    assert.ok((await get(through)).equals(data));
    through.destroy();
    assert.deepEqual(proxy.tunnels, [`127.0.0.1:${secure.port}`]);
    const around = proxyAgentsFor({ https: proxy.url, noProxy: '127.0.0.1' })!.httpsAgent;
    assert.ok((await get(around)).equals(data));
    around.destroy();
    assert.equal(proxy.tunnels.length, 1);
    assert.equal(proxyAgentsFor({}), undefined);
  });
});
