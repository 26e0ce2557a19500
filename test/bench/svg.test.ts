import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { escapeXml, renderChart, type Panel } from '../../bench/svg.js';

/**
 * A strict check of the XML subset the chart writer emits: one root, balanced tags, quoted
 * attributes, no bare '<' or '&' in text. Returns the element names in document order.
 */
function checkXml(doc: string): string[] {
  const names: string[] = [];
  const stack: string[] = [];
  let i = 0;
  let roots = 0;
  const text = (s: string) => {
    assert.ok(!/&(?!(amp|lt|gt|quot|apos|#\d+);)/.test(s), `bare & in ${JSON.stringify(s.slice(0, 60))}`);
    assert.ok(!s.includes('>'), `bare > in ${JSON.stringify(s.slice(0, 60))}`);
  };
  while (i < doc.length) {
    const lt = doc.indexOf('<', i);
    if (lt < 0) {
      assert.equal(doc.slice(i).trim(), '', 'text after the root');
      break;
    }
    const between = doc.slice(i, lt);
    if (stack.length === 0) assert.equal(between.trim(), '', 'text outside the root');
    else text(between);
    const gt = doc.indexOf('>', lt);
    assert.ok(gt > lt, 'unclosed tag');
    const tag = doc.slice(lt + 1, gt);
    i = gt + 1;
    if (tag.startsWith('?')) {
      assert.ok(tag.endsWith('?') && lt === 0, 'XML declaration only at the start');
      continue;
    }
    if (tag.startsWith('/')) {
      assert.equal(stack.pop(), tag.slice(1).trim(), 'mismatched closing tag');
      continue;
    }
    const selfClosing = tag.endsWith('/');
    const body = selfClosing ? tag.slice(0, -1) : tag;
    const m = /^([A-Za-z][\w:-]*)((?:\s+[\w:-]+="[^"<]*")*)\s*$/.exec(body);
    assert.ok(m, `malformed tag <${tag}>`);
    for (const [, , value] of m[2]!.matchAll(/([\w:-]+)="([^"]*)"/g)) text(value!.replace(/>/g, ''));
    const attrs = [...m[2]!.matchAll(/([\w:-]+)=/g)].map((x) => x[1]);
    assert.equal(new Set(attrs).size, attrs.length, `duplicate attribute in <${tag}>`);
    names.push(m[1]!);
    if (stack.length === 0) roots++;
    if (!selfClosing) stack.push(m[1]!);
  }
  assert.equal(stack.length, 0, `unclosed elements: ${stack.join(', ')}`);
  assert.equal(roots, 1, 'exactly one root element');
  return names;
}

const panels: Panel[] = [
  {
    title: 'Reads <warm> & "cold"',
    xLabel: 'size',
    yLabel: 'GB/s',
    xLog: true,
    yLog: true,
    series: [
      { name: 'penstock', points: [{ x: 4096, y: 0.2 }, { x: 2 ** 20, y: 9 }, { x: 2 ** 30, y: 43 }] },
      { name: "fs.readFile → <copy> & 'more'", dashed: true, points: [{ x: 4096, y: 0.02 }, { x: 2 ** 30, y: 1.3 }, { x: 2 ** 31, y: Number.NaN }] },
    ],
    formatX: (x) => `${x / 1024} KiB`,
  },
  { title: 'Threads', xLabel: 'threads', yLabel: 'GB/s', series: [{ name: 'one', points: [{ x: 1, y: 5 }, { x: 16, y: 43 }, { x: 4, y: 20 }] }] },
  { title: 'Empty', xLabel: 'x', yLabel: 'y', series: [] },
  { title: 'One point', xLabel: 'x', yLabel: 'y', xLog: true, yLog: true, series: [{ name: 'p', points: [{ x: 8, y: 8 }] }] },
];

describe('SVG charts', () => {
  it('escapes the five XML specials', () => {
    assert.equal(escapeXml(`<a href="x">&'`), '&lt;a href=&quot;x&quot;&gt;&amp;&apos;');
  });

  it('writes a well-formed SVG document with every panel, series and legend entry', () => {
    const svg = renderChart(panels, { title: 'penstock & friends' });
    const names = checkXml(svg);
    assert.equal(names[0], 'svg');
    assert.match(svg, /xmlns="http:\/\/www\.w3\.org\/2000\/svg"/);
    assert.equal(names.filter((n) => n === 'path').length, 3, 'one line per series with more than one point');
    assert.ok(svg.includes('fs.readFile → &lt;copy&gt; &amp; &apos;more&apos;'));
    assert.ok(svg.includes('Reads &lt;warm&gt; &amp; &quot;cold&quot;'));
    assert.ok(svg.includes('no data'));
    assert.ok(svg.includes('stroke-dasharray'));
    assert.ok(!/NaN|Infinity|undefined/.test(svg), 'no non-numbers reach the drawing');
  });

  it('draws points inside the plot area', () => {
    const svg = renderChart([panels[1]!], { width: 800, panelHeight: 300 });
    const rect = /<rect x="([\d.]+)" y="([\d.]+)" width="([\d.]+)" height="([\d.]+)" class="frame"\/>/.exec(svg);
    assert.ok(rect);
    const [x0, y0, w, h] = rect.slice(1).map(Number) as [number, number, number, number];
    const circles = [...svg.matchAll(/<circle cx="([\d.]+)" cy="([\d.]+)"/g)].map((m) => [Number(m[1]), Number(m[2])] as const);
    assert.equal(circles.length, 3);
    for (const [cx, cy] of circles) {
      assert.ok(cx >= x0 - 0.5 && cx <= x0 + w + 0.5, `x ${cx} outside`);
      assert.ok(cy >= y0 - 0.5 && cy <= y0 + h + 0.5, `y ${cy} outside`);
    }
    // Points are joined in x order whatever order they were given in.
    const d = /<path d="([^"]+)"/.exec(svg)![1]!;
    const xs = [...d.matchAll(/[ML]([\d.]+) /g)].map((m) => Number(m[1]));
    assert.deepEqual(xs, [...xs].sort((a, b) => a - b));
  });
});
