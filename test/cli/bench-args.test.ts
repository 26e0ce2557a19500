import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ArgError, parseIntList, parseSizeArg, parseSizeList } from '../../src/cli/kit/args.js';
import { parseBenchArgs as fromLine } from '../../src/cli/bench/command.js';
import { findCommand } from '../../src/cli/commands.js';
import { parseLine } from '../../src/cli/kit/command.js';

const parseBenchArgs = (argv: string[]) => fromLine(parseLine(findCommand('bench')!, argv));

const MiB = 1024 * 1024;

describe('penstock bench arguments', () => {
  it('has defaults for everything', () => {
    const a = parseBenchArgs([]);
    assert.equal(a.op, 'read');
    assert.equal(a.repeat, 5);
    assert.equal(a.cold, false);
    assert.equal(a.file, undefined);
    assert.equal(a.size, undefined);
    assert.equal(a.host, false);
    assert.equal(a.device, undefined);
    assert.equal(a.json, false);
    assert.equal(a.threads, undefined);
    assert.equal(a.progress, true);
  });

  it('reads every option', () => {
    const a = parseBenchArgs([
      'data.bin', '--size', '1GiB', '--host', '--threads', '1,4,16', '--task-size', '4MiB,1MiB',
      '--cold', '--repeat', '3', '--json', '--out', 'out.json', '--dir', '/scratch', '--no-progress',
    ]);
    assert.equal(a.file, 'data.bin');
    assert.equal(a.size, 1024 ** 3);
    assert.equal(a.host, true);
    assert.deepEqual(a.threads, [1, 4, 16]);
    assert.deepEqual(a.taskSizes, [4 * MiB, MiB]);
    assert.equal(a.cold, true);
    assert.equal(a.repeat, 3);
    assert.equal(a.json, true);
    assert.equal(a.out, 'out.json');
    assert.equal(a.dir, '/scratch');
    assert.equal(a.progress, false);
  });

  it('keeps list order and drops repeats', () => {
    assert.deepEqual(parseIntList('16, 4,16,1', '--threads', 1, 64), [16, 4, 1]);
    assert.deepEqual(parseSizeList('1MiB,1048576,4k', '--task-size'), [MiB, 4096]);
  });

  for (const [argv, pattern] of [
    [['--size', 'lots'], /--size is not a size/],
    [['--size', '0'], /at least 1 bytes/],
    [['--target', 'gpu'], /unknown option '--target'/],
    [['--host', '--device', '1'], /--device and --host exclude each other/],
    [['--device', 'x'], /--device must be an integer from 0/],
    [['--concurrency', '4'], /applies to s3:\/\/, http:\/\/ and https:\/\/ URLs only/],
    [['a.bin', '--json', 'out.json'], /too many operands: 'out.json'/],
    [['--op', 'copy'], /--op must be one of read, write/],
    [['--threads', '0'], /--threads must be an integer from 1/],
    [['--threads', '4,,8'], /comma-separated/],
    [['--threads', '2.5'], /--threads must be an integer/],
    [['--task-size', '5000'], /multiple of 4 KiB/],
    [['--repeat', '0'], /--repeat must be an integer from 1/],
    [['--bogus'], /unknown option '--bogus'/],
    [['--repeet', '3'], /did you mean '--repeat'/],
    [['a', 'b'], /too many operands: 'b'/],
    [['--op', 'write', '--cold'], /--cold applies to reads only/],
    [['--drop-caches'], /--drop-caches needs --cold/],
    [['--fsync'], /--fsync applies to writes only/],
  ] as [string[], RegExp][]) {
    it(`refuses ${argv.join(' ')}`, () => {
      assert.throws(() => parseBenchArgs(argv), (e: unknown) => e instanceof ArgError && pattern.test(e.message));
    });
  }

  it('parses sizes with units and refuses garbage', () => {
    assert.equal(parseSizeArg('8MiB', '--size'), 8 * MiB);
    assert.equal(parseSizeArg('1GB', '--size'), 1e9);
    assert.throws(() => parseSizeArg('8 parsecs', '--size'), ArgError);
  });
});
