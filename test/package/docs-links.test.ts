/**
 * Every relative link in the Markdown the package ships (README.md, CHANGELOG.md, docs/*.md)
 * leads to a file the package ships too, and every #anchor to a heading of that file: the docs
 * read from node_modules or the registry's page have no broken links.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { it } from 'node:test';
import { repoRoot } from '../helpers.js';

const pkg = JSON.parse(fs.readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as { files: string[] };

/** Whether a repository path is covered by package.json "files" (folders, files, and `dir/*.ext` globs). */
function shipped(rel: string): boolean {
  if (['package.json', 'README.md', 'LICENSE', 'CHANGELOG.md'].includes(rel)) return true;
  return pkg.files.some((entry) => {
    if (entry.includes('*')) {
      const re = new RegExp(`^${entry.replace(/[.+?^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '[^/]*')}$`);
      return re.test(rel);
    }
    return rel === entry || rel.startsWith(`${entry}/`);
  });
}

/** The shipped Markdown files, found from "files" and the files npm always packs. */
function shippedMarkdown(): string[] {
  const docs = fs.readdirSync(path.join(repoRoot, 'docs')).map((f) => `docs/${f}`);
  return ['README.md', 'CHANGELOG.md', ...docs].filter((f) => f.endsWith('.md') && shipped(f));
}

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens. */
function slug(heading: string): string {
  return heading.trim().toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, '').replace(/\s/g, '-');
}

function anchorsOf(text: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const m of withoutFences(text).matchAll(/^#{1,6}\s+(.+?)\s*#*$/gm)) {
    const base = slug(m[1]!);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n ? `${base}-${n}` : base);
  }
  return out;
}

/** The text without fenced code blocks, where `#` starts no heading. */
function withoutFences(text: string): string {
  return text.replace(/^```[\s\S]*?^```/gm, '');
}

/** The text without code (fenced blocks and inline), where `](` is not a link. */
function withoutCode(text: string): string {
  return withoutFences(text).replace(/`[^`\n]*`/g, '');
}

function relativeLinks(text: string): string[] {
  const links = [...withoutCode(text).matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)].map((m) => m[1]!);
  return links.filter((l) => !/^[a-z][a-z0-9+.-]*:/i.test(l));
}

it('the shipped Markdown is README.md, CHANGELOG.md and docs/*.md', () => {
  const files = shippedMarkdown();
  assert.ok(files.includes('README.md') && files.includes('docs/api.md'), files.join(', '));
  assert.ok(pkg.files.includes('docs/*.md') && !pkg.files.some((f) => f === 'docs' || f.startsWith('docs/results')), 'only docs/*.md ships');
});

it('every relative link in the shipped Markdown resolves inside the package', () => {
  const broken: string[] = [];
  for (const file of shippedMarkdown()) {
    const text = fs.readFileSync(path.join(repoRoot, file), 'utf8');
    for (const link of relativeLinks(text)) {
      const [target, anchor] = link.split('#') as [string, string | undefined];
      const rel = target ? path.posix.normalize(path.posix.join(path.posix.dirname(file), decodeURIComponent(target))) : file;
      if (rel.startsWith('..') || !fs.existsSync(path.join(repoRoot, rel)) || !shipped(rel)) {
        broken.push(`${file}: ${link} (${rel} is not a file the package ships)`);
        continue;
      }
      if (anchor && rel.endsWith('.md') && !anchorsOf(fs.readFileSync(path.join(repoRoot, rel), 'utf8')).has(anchor))
        broken.push(`${file}: ${link} (no heading #${anchor} in ${rel})`);
    }
  }
  assert.deepEqual(broken, []);
});

it('finds broken links and anchors (the checker itself)', () => {
  assert.deepEqual(relativeLinks('[a](docs/x.md) [b](https://e.com) `[c](no.md)` [d](#top)'), ['docs/x.md', '#top']);
  assert.ok(anchorsOf('# Why not GPUDirect Storage? `penstock doctor`\n## A b\n## A b\n').has('why-not-gpudirect-storage-penstock-doctor'));
  assert.ok(anchorsOf('## A b\n## A b\n').has('a-b-1'));
  assert.equal(shipped('docs/api.md'), true);
  assert.equal(shipped('bench/history/performance-notes.md'), false);
  assert.equal(shipped('test/gpu/ipc_torch.py'), false);
});
