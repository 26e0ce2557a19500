/** The settings table: configure() checks, PENSTOCK_* parsing, conflicts, the remote rows, and the table in docs/settings.md. */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { checkChanges, defaults, fromEnvironment, readEnvironment, suggest, validate } from '../../src/settings/config.js';
import { configure, getConfig } from '../../src/index.js';
import { openRemote } from '../../src/remote.js';
import { remoteSettings } from '../../src/sources/remote/settings.js';
import { RangeServer } from '../remote-range-server.js';
import { autoRemoteWorkers, SETTING_NAMES, SETTINGS_TABLE, settingsTableMarkdown } from '../../src/settings/table.js';
import { repoRoot } from '../helpers.js';

describe('configure() input', () => {
  it('rejects what is not a plain object of settings', () => {
    assert.throws(() => configure('threads' as never), { code: 'ERR_PENSTOCK_INVALID_ARGUMENT', message: /takes an object of settings/ });
    assert.throws(() => configure(null as never), { code: 'ERR_PENSTOCK_INVALID_ARGUMENT' });
    assert.throws(() => configure([4] as never), { code: 'ERR_PENSTOCK_INVALID_ARGUMENT' });
    // An object literal's __proto__ replaces the prototype (no own key): refused, not ignored.
    assert.throws(() => configure({ __proto__: { threads: 2 } } as never), { code: 'ERR_PENSTOCK_INVALID_ARGUMENT', message: /__proto__/ });
  });

  it('names an unknown key and suggests the near miss', () => {
    assert.throws(() => configure({ thread: 8 } as never), { code: 'ERR_PENSTOCK_UNKNOWN_SETTING', message: /Unknown setting 'thread' \(did you mean 'threads'\?\)/ });
    assert.throws(() => configure({ TaskSize: 4096 } as never), { message: /did you mean 'taskSize'/ });
    assert.throws(() => configure({ zzz: 1 } as never), (e: Error & { code: string }) => e.code === 'ERR_PENSTOCK_UNKNOWN_SETTING' && !/did you mean/.test(e.message));
    // JSON can carry an own "__proto__" key; it is a key like any other.
    assert.throws(() => checkChanges(JSON.parse('{"__proto__": {"threads": 2}}')), { code: 'ERR_PENSTOCK_UNKNOWN_SETTING', message: /'__proto__'/ });
  });

  it('leaves the settings unchanged when it refuses', () => {
    const before = getConfig();
    assert.throws(() => configure({ threads: 2, thread: 8 } as never));
    assert.throws(() => configure({ taskSize: 4097 }), { code: 'ERR_PENSTOCK_INVALID_SETTING', message: /taskSize: 4097 \(it accepts a positive multiple of 4096 bytes\)/ });
    assert.deepEqual(getConfig(), before);
  });

  it('validate() rejects unknown keys in a complete object too', () => {
    assert.throws(() => validate({ ...defaults(), extra: 1 } as never), { code: 'ERR_PENSTOCK_UNKNOWN_SETTING' });
    assert.deepEqual(validate(defaults()), defaults());
  });
});

describe('PENSTOCK_* variables', () => {
  it('name the variable and the value when a value cannot be used', () => {
    assert.throws(() => fromEnvironment({ PENSTOCK_THREADS: 'abc' }), {
      code: 'ERR_PENSTOCK_INVALID_SETTING',
      message: "PENSTOCK_THREADS='abc' is not valid: it accepts an integer from 1 to 1024",
    });
    assert.throws(() => fromEnvironment({ PENSTOCK_TASK_SIZE: '5000' }), { message: /PENSTOCK_TASK_SIZE='5000'.*multiple of 4096/ });
    assert.throws(() => fromEnvironment({ PENSTOCK_HOST_STAGING: 'maybe' }), { message: /PENSTOCK_HOST_STAGING='maybe'/ });
  });

  it('report every problem without throwing, keeping the usable values', () => {
    const r = readEnvironment({ PENSTOCK_THREADS: 'abc', PENSTOCK_COMPAT_MODE: 'sideways', PENSTOCK_TASK_SIZE: '1MiB' });
    assert.deepEqual(r.problems.map((p) => [p.variable, p.value, p.code]), [
      ['PENSTOCK_COMPAT_MODE', 'sideways', 'ERR_PENSTOCK_INVALID_SETTING'],
      ['PENSTOCK_THREADS', 'abc', 'ERR_PENSTOCK_INVALID_SETTING'],
    ]);
    assert.deepEqual(r.settings, { taskSize: 1 << 20 });
  });

  it('detect a specific variable contradicting PENSTOCK_DIRECT_IO', () => {
    assert.throws(() => fromEnvironment({ PENSTOCK_DIRECT_IO: '1', PENSTOCK_DIRECT_IO_READ: '0' }), {
      code: 'ERR_PENSTOCK_CONFLICTING_SETTINGS',
      message: /PENSTOCK_DIRECT_IO='1' and PENSTOCK_DIRECT_IO_READ='0' set directIoRead/,
    });
    assert.throws(() => fromEnvironment({ PENSTOCK_DIRECT_IO: 'off', PENSTOCK_DIRECT_IO_READ: 'auto' }), { code: 'ERR_PENSTOCK_CONFLICTING_SETTINGS' });
    assert.deepEqual(fromEnvironment({ PENSTOCK_DIRECT_IO: '1', PENSTOCK_DIRECT_IO_WRITE: 'true' }), { directIoRead: true, directIoWrite: true });
  });

  it('parse every form the table documents', () => {
    assert.deepEqual(
      fromEnvironment({ PENSTOCK_COMPAT_MODE: 'ON', PENSTOCK_BOUNCE_BUFFER_SIZE: 'auto', PENSTOCK_WRITE_THREADS: '3', PENSTOCK_MAPPED_READS: 'no', PENSTOCK_GDS_THRESHOLD: '0' }),
      { compatMode: 'on', bounceBufferSize: 'auto', writeThreads: 3, mappedReads: false, gdsThreshold: 0 },
    );
  });
});

describe('the settings table', () => {
  it('gives every default a value its own check accepts', () => {
    const d = defaults();
    for (const name of SETTING_NAMES) assert.ok(SETTINGS_TABLE[name].valid(d[name]), name);
  });

  it('suggests only near misses', () => {
    assert.equal(suggest('threds', SETTING_NAMES), 'threads');
    assert.equal(suggest('hostStagin', SETTING_NAMES), 'hostStaging');
    assert.equal(suggest('banana', SETTING_NAMES), undefined);
  });

  it('is what docs/settings.md shows', () => {
    const page = fs.readFileSync(path.join(repoRoot, 'docs/settings.md'), 'utf8');
    const m = /<!-- settings:begin -->\n([\s\S]*?)\n<!-- settings:end -->/.exec(page);
    assert.ok(m, 'docs/settings.md has a settings:begin/end section');
    assert.equal(m[1], settingsTableMarkdown(), 'regenerate with: npm run docs:tables');
  });
});

describe('remote settings (rows of the same table)', () => {
  const initial = getConfig();
  after(() => configure(initial));

  it('have their defaults and PENSTOCK_REMOTE_* variables in the table', () => {
    const d = defaults();
    assert.deepEqual(
      [d.remoteConcurrency, d.remoteRangeSize, d.remoteRetries, d.remoteTimeoutMs, d.remoteRetryBaseMs, d.remoteWorkers],
      [16, 8 << 20, 5, 30_000, 100, SETTINGS_TABLE.remoteWorkers.default()],
    );
    assert.deepEqual(
      fromEnvironment({ PENSTOCK_REMOTE_CONCURRENCY: '64', PENSTOCK_REMOTE_RANGE_SIZE: '16MiB', PENSTOCK_REMOTE_RETRIES: '0', PENSTOCK_REMOTE_TIMEOUT_MS: '500', PENSTOCK_REMOTE_RETRY_BASE_MS: '0', PENSTOCK_REMOTE_WORKERS: '3' }),
      { remoteConcurrency: 64, remoteRangeSize: 16 << 20, remoteRetries: 0, remoteTimeoutMs: 500, remoteRetryBaseMs: 0, remoteWorkers: 3 },
    );
    assert.throws(() => fromEnvironment({ PENSTOCK_REMOTE_CONCURRENCY: 'lots' }), { code: 'ERR_PENSTOCK_INVALID_SETTING', message: "PENSTOCK_REMOTE_CONCURRENCY='lots' is not valid: it accepts an integer from 1 to 1024" });
    assert.throws(() => fromEnvironment({ PENSTOCK_REMOTE_RANGE_SIZE: '1KiB' }), { message: /PENSTOCK_REMOTE_RANGE_SIZE='1KiB'.*from 64 KiB to 1 GiB/ });
    assert.throws(() => fromEnvironment({ PENSTOCK_REMOTE_WORKERS: '-1' }), { code: 'ERR_PENSTOCK_INVALID_SETTING' });
  });

  it('are changed by configure(), checked, and overridden per object', () => {
    assert.throws(() => configure({ remoteRetries: -1 }), { code: 'ERR_PENSTOCK_INVALID_SETTING', message: /remoteRetries: -1 \(it accepts an integer from 0 to 100\)/ });
    assert.throws(() => configure({ remoteRetrys: 2 } as never), { message: /did you mean 'remoteRetries'/ });
    assert.equal(configure({ remoteRetries: 9 }).remoteRetries, 9);
    assert.equal(remoteSettings().remoteRetries, 9);
    assert.deepEqual(remoteSettings({ remoteRetries: 2, remoteConcurrency: 3, remoteWorkers: 1 }), { ...pickRemote(getConfig()), remoteRetries: 2, remoteConcurrency: 3, remoteWorkers: 1 });
    assert.throws(() => remoteSettings({ remoteConcurrency: 0 }), { code: 'ERR_PENSTOCK_INVALID_SETTING', message: /remoteConcurrency: 0/ });
    assert.throws(() => remoteSettings({ remoteRangeSize: '8MiB' as never }), { code: 'ERR_PENSTOCK_INVALID_SETTING' });
    configure(initial);
    assert.equal(remoteSettings().remoteRetries, initial.remoteRetries);
  });

  it("resolve remoteWorkers 'auto' from the cores, and to 0 for an object with a lookup function", async () => {
    assert.deepEqual([1, 2, 7, 8, 15, 16, 31, 32, 64, 256].map((c) => autoRemoteWorkers(c)), [0, 0, 0, 2, 3, 4, 7, 8, 8, 8]);
    assert.deepEqual(fromEnvironment({ PENSTOCK_REMOTE_WORKERS: 'auto' }), { remoteWorkers: 'auto' });
    assert.throws(() => fromEnvironment({ PENSTOCK_REMOTE_WORKERS: 'some' }), { message: /PENSTOCK_REMOTE_WORKERS='some' is not valid: it accepts 'auto', or an integer from 0 to 256/ });
    assert.equal(remoteSettings({ remoteWorkers: 'auto' }).remoteWorkers, autoRemoteWorkers());
    assert.equal(remoteSettings({ remoteWorkers: 'auto' }, true).remoteWorkers, 0);
    assert.equal(remoteSettings({ remoteWorkers: 3 }, true).remoteWorkers, 3);
    // With 'auto', a lookup function keeps the object on the main thread; with a count it is refused.
    const server = await new RangeServer().start();
    try {
      server.put('/object', Buffer.alloc(1000, 1));
      const lookup = ((host: string, o: object, cb: (e: null, a: string, f: number) => void) => cb(null, '127.0.0.1', 4)) as never;
      await using obj = await openRemote(server.url(), { remoteWorkers: 'auto', lookup });
      assert.equal(obj.info.parseWorkers, 0);
      await assert.rejects(openRemote(server.url(), { remoteWorkers: 2, lookup }), { code: 'ERR_PENSTOCK_INVALID_ARGUMENT' });
    } finally {
      await server.stop();
    }
  });

  it('reach the reads: configure() sets how many ranged GETs a read sends', async () => {
    const server = await new RangeServer().start();
    try {
      server.put('/object', Buffer.alloc(1 << 20, 7));
      configure({ remoteRangeSize: 64 * 1024, remoteConcurrency: 2 });
      {
        await using obj = await openRemote(server.url());
        assert.equal(await obj.read(Buffer.alloc(1 << 20)), 1 << 20);
        assert.equal(obj.stats().routes['remote-host'].requests, 16);
        assert.ok(server.peakConnections <= 2, `${server.peakConnections} connections`);
      }
      // An object's own option wins over configure().
      await using obj = await openRemote(server.url(), { remoteRangeSize: 256 * 1024 });
      await obj.read(Buffer.alloc(1 << 20));
      assert.equal(obj.stats().routes['remote-host'].requests, 4);
    } finally {
      configure(initial);
      await server.stop();
    }
  });
});

function pickRemote(s: ReturnType<typeof getConfig>) {
  const { remoteConcurrency, remoteRangeSize, remoteRetries, remoteTimeoutMs, remoteRetryBaseMs, remoteWorkers } = s;
  return { remoteConcurrency, remoteRangeSize, remoteRetries, remoteTimeoutMs, remoteRetryBaseMs, remoteWorkers };
}
