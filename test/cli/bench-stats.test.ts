import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { formatGBps, formatMicros, markdownTable, textTable } from '../../src/cli/kit/format.js';
import { describeRoutes, describeStages, measure, measureLatency, routeDelta } from '../../src/cli/bench/measure.js';
import { computeTargets } from '../../bench/report.js';
import type { SuiteReport } from '../../bench/context.js';
import { formatRatio } from '../../src/cli/kit/format.js';
import { renderBar } from '../../src/cli/kit/progress.js';
import { gbps, median, percentile, summarize } from '../../src/cli/bench/stats.js';
import { parseDdOutput } from '../../src/cli/bench/system.js';
import { stats, type StatsSnapshot } from '../../src/measure.js';

describe('benchmark statistics', () => {
  it('takes medians of odd and even counts without reordering the input', () => {
    const xs = [5, 1, 3];
    assert.equal(median(xs), 3);
    assert.deepEqual(xs, [5, 1, 3]);
    assert.equal(median([4, 1, 3, 2]), 2.5);
    assert.ok(Number.isNaN(median([])));
  });

  it('interpolates percentiles between ranks', () => {
    const xs = Array.from({ length: 101 }, (_, i) => i);
    assert.equal(percentile(xs, 50), 50);
    assert.equal(percentile(xs, 99), 99);
    assert.equal(percentile([10, 20], 25), 12.5);
    assert.equal(percentile([7], 99), 7);
    assert.throws(() => percentile(xs, 101), RangeError);
  });

  it('uses decimal gigabytes', () => {
    assert.equal(gbps(2e9, 1), 2);
    assert.equal(gbps(1e9, 0.25), 4);
  });

  it('summarizes repeats: median, min, max and CPU per GB over all bytes', () => {
    const s = summarize([
      { seconds: 1, bytes: 1e9, cpuSeconds: 0.1 },
      { seconds: 0.5, bytes: 1e9, cpuSeconds: 0.1 },
      { seconds: 0.25, bytes: 1e9, cpuSeconds: 0.1 },
    ]);
    assert.equal(s.medianGBps, 2);
    assert.equal(s.minGBps, 1);
    assert.equal(s.maxGBps, 4);
    assert.ok(Math.abs(s.cpuSecondsPerGB - 0.1) < 1e-12);
    assert.equal(s.medianSeconds, 0.5);
    assert.throws(() => summarize([]), RangeError);
  });

  it('measures repeats after an untimed warm-up, calling prepare and settle around each', async () => {
    const calls: string[] = [];
    const m = await measure({
      repeats: 3,
      iterations: 2,
      prepare: () => calls.push('prepare'),
      settle: () => calls.push('settle'),
      run: async () => (calls.push('run'), 1000),
    });
    assert.equal(m.samples.length, 3);
    assert.ok(m.samples.every((s) => s.bytes === 2000));
    assert.deepEqual(calls.slice(0, 4), ['prepare', 'run', 'run', 'settle']);
    assert.equal(calls.filter((c) => c === 'run').length, 8);
    assert.deepEqual(m.routes, {});
    const cold = await measure({ repeats: 2, warmup: false, run: async () => 1 });
    assert.equal(cold.samples.length, 2);
  });

  it('times operations one at a time for latency', async () => {
    const seen: number[] = [];
    const l = await measureLatency({ iterations: 50, warmup: 5, run: async (i) => seen.push(i) });
    assert.equal(l.iterations, 50);
    assert.equal(seen.length, 55);
    assert.ok(l.p50Us <= l.p99Us && l.p99Us <= l.maxUs && l.minUs <= l.p50Us);
  });

  it('reports route deltas, naming only routes that carried something', () => {
    const before = stats();
    const after: StatsSnapshot = structuredClone(before);
    after.routes['posix-host'].ops += 256;
    after.routes['posix-host'].bytes += 2 ** 30;
    after.routes['posix-host'].operations += 1;
    const d = routeDelta(before, after);
    assert.deepEqual(Object.keys(d), ['posix-host']);
    assert.equal(d['posix-host']!.ops, 256);
    assert.equal(describeRoutes(d), 'posix-host 256 ops');
    assert.equal(describeRoutes({}, 'fs.readFile'), 'fs.readFile');
  });

  it('says where thread time went, over all routes', () => {
    const before = stats();
    const after: StatsSnapshot = structuredClone(before);
    Object.assign(after.routes['posix-device'], { ops: 4, bytes: 4, busySeconds: 2, ioSeconds: 1, waitSeconds: 0.5 });
    Object.assign(after.routes['mapped-device'], { ops: 4, bytes: 4, busySeconds: 2, ioSeconds: 2 });
    const d = routeDelta(before, after);
    assert.equal(d['posix-device']!.waitSeconds, 0.5);
    assert.equal(describeStages(d), 'syscalls 75%, GPU waits 13%, other 13%');
    assert.equal(describeStages({ 'posix-host': { ...d['posix-device']!, waitSeconds: 0 } }), 'syscalls 50%, other 50%');
    assert.equal(describeStages({}), '');
  });

  it('compares each cold repeat with the dd run just before it', () => {
    const row = (samples: number[], paired?: number[]) => ({
      section: 'cold', methodId: 'penstock-device-read', method: 'penstock', target: 'device' as const, op: 'read' as const, state: 'cold' as const,
      size: 2 ** 30, path: '', medianGBps: samples[1]! / 1e9,
      samples: samples.map((bps) => ({ seconds: 1, bytes: bps, cpuSeconds: 0 })), ...(paired ? { pairedDiskGBps: paired } : {}),
    });
    const report = (r: ReturnType<typeof row>, disk: number) =>
      ({ machine: { gpu: 'H200' }, limits: [{ name: 'disk-direct', what: '', path: '', gbps: disk }], results: [r], latency: [] }) as unknown as SuiteReport;
    const cold = (rep: SuiteReport) => computeTargets(rep, 2 ** 30).find((t) => t.name.startsWith('cold'))!;
    // Paired: 1.8/2.0, 1.6/1.6, 1.2/1.5 → ratios 0.9, 1.0, 0.8 → median 0.9 (a miss), whatever the run's median dd.
    const paired = cold(report(row([1.8e9, 1.6e9, 1.2e9], [2.0, 1.6, 1.5]), 1.0));
    assert.equal(paired.status, 'miss');
    assert.equal(paired.measured, formatRatio(0.9));
    // Unpaired: the median repeat over the run's median dd rate.
    assert.equal(cold(report(row([1.8e9, 1.6e9, 1.2e9]), 1.6)).measured, formatRatio(1.0));
  });

  it("reads dd's rate line", () => {
    const text = '64+0 records in\n64+0 records out\n1073741824 bytes (1.1 GB, 1.0 GiB) copied, 0.712345 s, 1.5 GB/s\n';
    assert.deepEqual(parseDdOutput(text), { bytes: 1073741824, seconds: 0.712345 });
    assert.equal(parseDdOutput('dd: failed to open'), undefined);
  });
});

describe('benchmark formatting', () => {
  it('formats rates and times', () => {
    assert.equal(formatGBps(43.21), '43.2');
    assert.equal(formatGBps(123.4), '123');
    assert.equal(formatGBps(1.234), '1.23');
    assert.equal(formatGBps(0.01234), '0.012');
    assert.equal(formatGBps(Number.NaN), '—');
    assert.equal(formatMicros(12.34), '12.3 µs');
    assert.equal(formatMicros(2500), '2.50 ms');
  });

  it('aligns text tables and escapes Markdown cells', () => {
    const t = textTable(['a', 'value'], [['x', '1'], ['long', '123']], ['left', 'right']).split('\n');
    assert.equal(t[0], 'a     value');
    assert.equal(t[2], 'x         1');
    assert.equal(t[3], 'long    123');
    const md = markdownTable(['h|1', 'h2'], [['a|b', 'c']], ['left', 'right']);
    assert.equal(md, '| h\\|1 | h2 |\n| --- | ---: |\n| a\\|b | c |\n');
  });

  it('fits the progress bar to the terminal', () => {
    const bar = renderBar('reading', 50, 100, 1, 60);
    assert.ok(bar.length <= 59, bar);
    assert.match(bar, /^reading \[#+\.+\]\s+50% /);
  });
});
