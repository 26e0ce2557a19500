/**
 * A real S3-compatible server for the tests: @20minutes/s3rver on 127.0.0.1 (a free port), with
 * its files in a temporary folder, started and stopped by the tests. It checks SigV4 signatures
 * (header and query) with the key pair S3RVER / S3RVER. Its known gaps, which the tests work
 * around: it lets unsigned requests through, and answers the suffix range `bytes=-N` with the
 * first N+1 bytes; it does not check If-Match or the region in the signature.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { LookupFunction } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import S3rver from '@20minutes/s3rver';
import aws4 from 'aws4';

/** The key pair s3rver knows. */
export const S3RVER_CREDENTIALS = { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' };

/** Every host name resolves to 127.0.0.1 (virtual-hosted bucket names such as b.s3.localhost). */
export const loopbackLookup: LookupFunction = (_host, options, callback) => {
  if ((options as { all?: boolean }).all) (callback as unknown as (e: null, a: { address: string; family: number }[]) => void)(null, [{ address: '127.0.0.1', family: 4 }]);
  else callback(null, '127.0.0.1', 4);
};

/** A running s3rver. */
export interface S3Server {
  port: number;
  /** Path-style endpoint: http://127.0.0.1:PORT */
  endpoint: string;
  /** Endpoint whose virtual-hosted form s3rver recognises: http://s3.localhost:PORT (with {@link loopbackLookup}). */
  vhostEndpoint: string;
  /** Stores an object with a signed PUT. */
  put(bucket: string, key: string, body: Buffer): Promise<void>;
  /** A raw request, for probing the server itself. */
  raw(method: string, pathAndQuery: string, headers?: Record<string, string>): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: Buffer }>;
  stop(): Promise<void>;
}

/** Starts s3rver with the given buckets. */
export async function startS3rver(buckets: string[]): Promise<S3Server> {
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'penstock-s3rver-'));
  const server = new S3rver({
    address: '127.0.0.1', port: 0, silent: true, directory, resetOnClose: false, serviceEndpoint: 'localhost',
    configureBuckets: buckets.map((name) => ({ name })),
  });
  const { port } = await server.run();
  const raw: S3Server['raw'] = (method, pathAndQuery, headers = {}) =>
    new Promise((resolve, reject) => {
      const req = http.request({ host: '127.0.0.1', port, method, path: pathAndQuery, headers, agent: false }, (res) => {
        const parts: Buffer[] = [];
        res.on('data', (c: Buffer) => parts.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(parts) }));
        res.on('error', reject);
      });
      req.on('error', reject);
      req.end();
    });
  return {
    port,
    endpoint: `http://127.0.0.1:${port}`,
    vhostEndpoint: `http://s3.localhost:${port}`,
    raw,
    async put(bucket, key, body) {
      const opts = { host: '127.0.0.1', port, method: 'PUT', path: `/${bucket}/${key}`, service: 's3', region: 'us-east-1', body, headers: { 'Content-Type': 'application/octet-stream' } as Record<string, string | number> };
      aws4.sign(opts, S3RVER_CREDENTIALS);
      await new Promise<void>((resolve, reject) => {
        const req = http.request({ ...opts, agent: false }, (res) => {
          res.resume();
          res.on('end', () => (res.statusCode === 200 ? resolve() : reject(new Error(`PUT ${key}: ${res.statusCode}`))));
        });
        req.on('error', reject);
        req.end(body);
      });
    },
    async stop() {
      server.httpServer?.closeAllConnections();
      await server.close();
      fs.rmSync(directory, { recursive: true, force: true });
    },
  };
}

// As a program (`node s3rver.js --serve SIZE`): s3rver with s3://bench/object of SIZE
// random bytes, its port printed, for benchmarks in another process. `--serve` is required, as
// the test runner runs every file of this folder as a program too.
if (process.argv[1] === fileURLToPath(import.meta.url) && process.argv[2] === '--serve') {
  const size = Number(process.argv[3] ?? 64 << 20);
  const server = await startS3rver(['bench']);
  await server.put('bench', 'object', crypto.randomBytes(size));
  process.stdout.write(`${server.port}\n`);
  const stop = () => void server.stop().then(() => process.exit(0));
  process.on('SIGTERM', stop);
  if (process.send) process.on('disconnect', stop);
}
