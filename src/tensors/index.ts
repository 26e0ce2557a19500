/**
 * Tensor files (safetensors, sharded checkpoints, .npy) into GPU or host memory.
 */
export { loadTensors, type LoadTensorsOptions } from './loader.js';
export { TensorSet, type TensorValues, type TensorView, type TensorLayoutEntry, type FileLoadRecord, type SlabPlace } from './tensor-set.js';
export { describeCheckpoint, closeCheckpoint, type Checkpoint, type CheckpointFile, type CheckpointInput, type FileTensor, type DescribeOptions } from './checkpoint.js';
export { planLoad, SLAB_ALIGNMENT, type LoadPlan, type PlannedTensor, type Span, type TensorFilter, type RowShard, type PlanOptions } from './load-plan.js';
export { parseSafetensorsHeader, MAX_HEADER_BYTES, type SafetensorsHeader, type TensorEntry } from '../formats/safetensors.js';
export { parseNpyHeader, type NpyHeader } from '../formats/npy.js';
export { parseShardedIndex, type ShardedIndex } from '../formats/sharded-index.js';
export { DTYPE_BITS, DTYPES, dtypeBits, byteLengthOf, contiguousStrides, isDtype, type Dtype } from '../formats/dtypes.js';
export { TENSOR_ERROR_CODES, TensorFormatError, type TensorErrorCode } from '../formats/errors.js';
export type { TensorSource, SourceOpener } from './source.js';
export { verifyTensorSet, assertVerified, tensorSha256, fileRangeSha256, type TensorCheck } from './verify.js';
