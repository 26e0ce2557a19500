/**
 * `penstock/formats`: tensor files without loading them. Checkpoints described (every header
 * parsed and checked) and planned, the safetensors, `.npy` and sharded-index parsers, the dtypes,
 * and the sha256 hashes that verification compares.
 *
 * @packageDocumentation
 */
export { describeCheckpoint, closeCheckpoint, type Checkpoint, type CheckpointFile, type FileTensor, type DescribeOptions } from './tensors/checkpoint.js';
export { planLoad, SLAB_ALIGNMENT, type LoadPlan, type PlannedTensor, type Span, type PlanOptions } from './tensors/load-plan.js';
export { parseSafetensorsHeader, MAX_HEADER_BYTES, type SafetensorsHeader, type TensorEntry } from './formats/safetensors.js';
export { parseNpyHeader, type NpyHeader } from './formats/npy.js';
export { parseShardedIndex, type ShardedIndex } from './formats/sharded-index.js';
export { DTYPES, dtypeBits, byteLengthOf, contiguousStrides, isDtype } from './formats/dtypes.js';
export { tensorSha256, fileRangeSha256 } from './tensors/verify.js';
