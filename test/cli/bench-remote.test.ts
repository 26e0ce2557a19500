/** `penstock bench URL`: the remote benchmark behind the bench command. */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import { pattern, repoRoot } from '../helpers.js';
import { RangeServer } from '../remote-range-server.js';

const run = promisify(execFile);
const cli = path.join(repoRoot, 'dist/src/cli/main.js');
const server = new RangeServer();

before(async () => {
  await server.start();
  server.put('/object', pattern(2 << 20, 3));
});
after(() => server.stop());

describe('penstock bench URL', () => {
  it('measures remote reads into host memory for each concurrency, with requests counted', async () => {
    const { stdout } = await run(process.execPath, [cli, 'bench', server.url(), '--host', '--size', '1MiB', '--range-size', '64KiB', '--concurrency', '1,4', '--repeat', '2', '--json']);
    const r = JSON.parse(stdout) as { target: string; results: { concurrency: number; bytes: number; gbps: number[]; requests: number; retries: number }[] };
    assert.equal(r.target, 'remote-host');
    assert.deepEqual(r.results.map((x) => x.concurrency), [1, 4]);
    for (const x of r.results) {
      assert.equal(x.bytes, 1 << 20);
      assert.equal(x.gbps.length, 2);
      assert.equal(x.requests, 2 * 16);
      assert.equal(x.retries, 0);
    }
  });

  it('prints a table, and refuses bad options with status 2', async () => {
    const { stdout } = await run(process.execPath, [cli, 'bench', server.url(), '--host', '--repeat', '1']);
    assert.match(stdout, /remote-host/);
    assert.match(stdout, /CPU s\/GB/);
    await assert.rejects(run(process.execPath, [cli, 'bench', server.url(), '--target', 'moon']), (e: { code?: number; stderr?: string }) => e.code === 2 && /--target/.test(e.stderr ?? ''));
  });
});
