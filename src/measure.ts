/**
 * `penstock/measure`: what measuring reads takes. The process-wide counters per route, operations
 * in flight, the page cache (how much of a file it holds; dropping it for cold reads), and sizes
 * as penstock writes them (`4 MiB`).
 *
 * @packageDocumentation
 */
export { stats, resetStats, inflight, pageCacheResidency, dropPageCache } from './engine/process.js';
export { ROUTES, type RouteCounters, type StatsSnapshot } from './engine/stats.js';
export { parseSize, formatSize } from './settings/config.js';
