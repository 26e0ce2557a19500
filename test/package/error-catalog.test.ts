/** The error catalog: every code thrown anywhere in src/ is listed, with a meaning, in one table. */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { ERROR_CODE_TABLES, errorTableMarkdown } from '../../src/error-catalog.js';
import * as penstock from '../../src/index.js';
import { repoRoot } from '../helpers.js';

/** Every quoted ERR_PENSTOCK_* literal in src/ (TypeScript and native), with where it is. */
function codesInSource(): Map<string, string> {
  const found = new Map<string, string>();
  const walk = (dir: string) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (/\.(ts|cc|h)$/.test(e.name)) {
        const text = fs.readFileSync(p, 'utf8');
        for (const m of text.matchAll(/['"`](ERR_PENSTOCK_[A-Z0-9_]+)['"`]/g))
          if (!found.has(m[1]!)) found.set(m[1]!, `${path.relative(repoRoot, p)}:${text.slice(0, m.index).split('\n').length}`);
      }
    }
  };
  walk(path.join(repoRoot, 'src'));
  return found;
}

describe('error catalog', () => {
  it('lists every ERR_PENSTOCK_* code that src/ contains', () => {
    const missing = [...codesInSource()].filter(([code]) => !(code in penstock.ERROR_CODES)).map(([code, where]) => `${code} (${where})`);
    assert.deepEqual(missing, [], 'add these to their module\'s error-code table and to ERROR_CODE_TABLES');
  });

  it('lists no code that nothing throws', () => {
    const used = codesInSource();
    const stale = Object.keys(penstock.ERROR_CODES).filter((c) => c.startsWith('ERR_PENSTOCK_') && !used.has(c));
    assert.deepEqual(stale, []);
  });

  it('has each code once, with a one-line meaning', () => {
    const seen = new Map<string, string>();
    for (const [table, codes] of Object.entries(ERROR_CODE_TABLES))
      for (const [code, meaning] of Object.entries(codes as Record<string, string>)) {
        assert.ok(!seen.has(code), `${code} is in both ${seen.get(code)} and ${table}`);
        seen.set(code, table);
        assert.match(code, /^(ERR_PENSTOCK_[A-Z0-9_]+|ABORT_ERR)$/);
        assert.ok(meaning.length > 10 && !meaning.includes('\n'), code);
      }
    assert.equal(seen.size, Object.keys(penstock.ERROR_CODES).length);
  });

  it('is the error table of docs/errors.md', () => {
    const page = fs.readFileSync(path.join(repoRoot, 'docs/errors.md'), 'utf8');
    const m = /<!-- errors:begin -->\n([\s\S]*?)\n<!-- errors:end -->/.exec(page);
    assert.ok(m, 'docs/errors.md has an errors:begin/end section');
    assert.equal(m[1], errorTableMarkdown(), 'regenerate with: npm run docs:tables');
  });

  it('gives the same kind of mistake the same code', async () => {
    const bad = [-1, 1.5, Number.NaN, '8', 2 ** 53];
    for (const v of bad) {
      assert.throws(() => penstock.PinnedBuffer.alloc(v as number), { code: 'ERR_PENSTOCK_INVALID_ARGUMENT' }, `alloc(${String(v)})`);
      assert.throws(() => penstock.DeviceBuffer.alloc(v as number), { code: 'ERR_PENSTOCK_INVALID_ARGUMENT' }, `DeviceBuffer.alloc(${String(v)})`);
    }
    const f = await penstock.open(path.join(repoRoot, 'package.json'), 'r');
    try {
      for (const v of bad) {
        await assert.rejects(f.read(Buffer.alloc(16), { size: v as number }), { code: 'ERR_PENSTOCK_INVALID_ARGUMENT' }, `size ${String(v)}`);
        await assert.rejects(f.read(Buffer.alloc(16), { fileOffset: v as number }), { code: 'ERR_PENSTOCK_INVALID_ARGUMENT' }, `fileOffset ${String(v)}`);
      }
    } finally {
      await f.close();
    }
  });

});
