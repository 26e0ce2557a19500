/**
 * penstock: load files and checkpoints into GPU (or host) memory from Node.js, and know which path
 * every byte took.
 *
 * This entry point is what loading takes: files, buffers, tensor sets, the `penstock serve`
 * client, settings and GPUs, and every error class. Specialist parts have entry points of their
 * own: `penstock/formats`, `penstock/remote`, `penstock/ipc`, `penstock/serve`, `penstock/batch`,
 * `penstock/doctor` and `penstock/measure`.
 *
 * @packageDocumentation
 */
export { open, type PenstockFile, type OpenFlags, type OpenOptions, type ReadOptions, type WriteOptions, type TransferOptions, type Memory } from './engine/file.js';
export { readFileToDevice, readFileToHost, writeFile, type WholeFileOptions } from './engine/whole-file.js';
export type { FileRoute, RouteReason } from './engine/routing.js';
export type { Route } from './engine/stats.js';
export { DeviceBuffer, type DeviceBufferOptions } from './memory/device-buffer.js';
export { PinnedBuffer } from './memory/pinned-buffer.js';
export type { HostMemory } from './memory/host-memory.js';
export { loadTensors, type LoadTensorsOptions } from './tensors/loader.js';
export type { TensorSet, TensorView, TensorValues, TensorLayoutEntry, FileLoadRecord, SlabPlace } from './tensors/tensor-set.js';
export type { CheckpointInput } from './tensors/checkpoint.js';
export type { TensorFilter, RowShard } from './tensors/load-plan.js';
export { verifyTensorSet, assertVerified, type TensorCheck } from './tensors/verify.js';
export type { Dtype } from './formats/dtypes.js';
export type { Source, SourceOpener, SourceRecord } from './sources/source.js';
export { connectServer, type ServeClient, type ServedTensorSet } from './serve/client.js';
export type { SetSpec } from './serve/protocol.js';
export { configure, getConfig, hasGpu, deviceCount, deviceInfo, memoryInfo } from './engine/process.js';
export { prepareGpu } from './addon/gpu-preparation.js';
export type { Settings, CompatMode } from './settings/config.js';
export type { NativeDeviceInfo as DeviceInfo } from './addon/binding.js';
export { PenstockError, PenstockUsageError, PenstockSystemError, CudaError, CuFileError, AbortError } from './vocabulary/errors.js';
export { TensorFormatError } from './formats/errors.js';
export { RemoteError } from './sources/remote/errors.js';
export { ERROR_CODES, type ErrorCode } from './error-catalog.js';
