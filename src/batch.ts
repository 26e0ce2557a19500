/**
 * `penstock/batch`: many reads in one call: ranges of one or several files (`readBatch`), and
 * whole files or ranges into several GPUs (`loadShards`).
 *
 * @packageDocumentation
 */
export { readBatch, type BatchRange, type BatchReadOptions } from './engine/batch/batch-read.js';
export type { BatchReadResult, BatchRecord, BatchRouteCounts } from './engine/batch/batch-result.js';
export { loadShards, type Shard, type ShardResult, type LoadShardsOptions } from './engine/shards.js';
