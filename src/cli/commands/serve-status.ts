/**
 * `penstock serve-status [--socket PATH] [--json] [--evict ID | --evict-idle]`: what a running
 * daemon holds — each resident set's bytes, GPU, leases, hits and load time — and its totals.
 */
import { formatSize } from '../../settings/config.js';
import { connectServer } from '../../serve/client.js';
import { defaultSocketPath } from '../../serve/socket-path.js';
import type { ResidentSetInfo } from '../../serve/resident-sets.js';
import { EXIT } from '../common.js';
import { ArgError } from '../kit/args.js';
import type { ParsedLine } from '../kit/command.js';

function describeSet(s: ResidentSetInfo): string {
  const what = s.spec.path.length === 1 ? s.spec.path[0]! : `${s.spec.path[0]} (+${s.spec.path.length - 1} files)`;
  const filter = s.spec.filter ? (Array.isArray(s.spec.filter) ? ` [${s.spec.filter.length} tensors]` : ` [prefix ${s.spec.filter.prefix}]`) : '';
  const rows = s.spec.rows ? ` [rows ${s.spec.rows.index}/${s.spec.rows.count}]` : '';
  return `${what}${filter}${rows}`;
}

/** Runs `penstock serve-status`. */
export async function runServeStatusCli({ values }: ParsedLine): Promise<number> {
  const v = {
    socket: typeof values.socket === 'string' ? values.socket : undefined,
    evict: typeof values.evict === 'string' ? values.evict : undefined,
    'evict-idle': values['evict-idle'] === true,
    json: values.json === true,
  };
  if (v.evict !== undefined && v['evict-idle']) throw new ArgError('--evict and --evict-idle exclude each other');
  const socket = v.socket ?? defaultSocketPath();
  let connected;
  try {
    connected = await connectServer(socket);
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (code !== 'ENOENT' && code !== 'ECONNREFUSED') throw err;
    process.stderr.write(`penstock serve-status: no daemon answers on ${socket} (${code}); start one with "penstock serve --socket ${socket}"\n`);
    return EXIT.failure;
  }
  await using client = connected;
  const evicted = v.evict !== undefined ? await client.evict(v.evict) : v['evict-idle'] ? await client.evictIdle() : undefined;
  const [health, stats, sets] = [await client.health(), await client.stats(), await client.list()];
  if (v.json) {
    process.stdout.write(`${JSON.stringify({ health, stats, sets, ...(evicted ? { evicted } : {}) })}\n`);
    return EXIT.ok;
  }
  const out: string[] = [];
  if (evicted) out.push(`evicted ${evicted.length} set(s)`);
  out.push(`daemon pid ${String(health.pid)}, penstock ${String(health.version)}, protocol ${String(health.protocol)}, up ${Number(health.uptimeSeconds).toFixed(0)} s`);
  out.push(`${sets.length} set(s), ${formatSize(Number(stats.residentBytes))} resident, ${String(stats.leases)} lease(s), ${String(stats.connections)} connection(s); acquires ${String(stats.acquires)}, hits ${String(stats.hits)}, loads ${String(stats.loads)}, evictions ${String(stats.evictions)}`);
  for (const d of stats.devices as { device: number; held: number; budget: number; free: number; total: number }[])
    out.push(`GPU ${d.device}: ${formatSize(d.held)} held of a ${formatSize(d.budget)} budget; ${formatSize(d.free)} free of ${formatSize(d.total)}`);
  if (sets.length > 0) {
    out.push('');
    out.push(['id', 'GPU', 'bytes', 'leases', 'hits', 'load s', 'state', 'set'].join('\t'));
    for (const s of sets)
      out.push([s.id, s.device, formatSize(s.bytes), s.leases, s.hits, s.loadSeconds.toFixed(3), s.state, describeSet(s)].join('\t'));
  }
  process.stdout.write(`${out.join('\n')}\n`);
  return EXIT.ok;
}
