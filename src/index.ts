/**
 * penstock: move file data straight between storage and GPU memory from Node.js.
 *
 * @packageDocumentation
 */
export { configure, getConfig, stats, resetStats, runtimeInfo, pageCacheResidency, dropPageCache, memoryInfo, inflight, hasGpu, deviceCount, deviceInfo } from './engine/process.js';
export { prepareGpu } from './addon/gpu-preparation.js';
export { DeviceBuffer, type DeviceBufferOptions } from './memory/device-buffer.js';
export { PinnedBuffer } from './memory/pinned-buffer.js';
export { open, PenstockFile, type OpenFlags, type OpenOptions, type ReadOptions, type WriteOptions, type TransferOptions, type Memory } from './engine/file.js';
export { readFileToDevice, readFileToHost, writeFile, type WholeFileOptions } from './engine/whole-file.js';
export { diagnose, readGdscheck, render as renderDoctorReport, type Check, type CheckStatus, type DiagnoseOptions, type DoctorReport, type Finding, type PathReport, type PlatformFacts, type PredictedRoute, type Prediction, type ProbeResult, type ShapePrediction, type GdscheckReport } from './doctor/index.js';
export { readBatch, BATCH_ERROR_CODES, type BatchRange, type BatchReadOptions } from './engine/batch/batch-read.js';
export type { BatchReadResult, BatchRecord, BatchRouteCounts } from './engine/batch/batch-result.js';
export { loadShards, type Shard, type ShardResult, type LoadShardsOptions } from './engine/shards.js';
export type { HostMemory } from './memory/host-memory.js';
export type { FileRoute, RouteReason } from './engine/routing.js';
export { ROUTES, type Route, type RouteCounters, type StatsSnapshot } from './engine/stats.js';
export { parseSize, formatSize, type Settings, type CompatMode } from './settings/config.js';
export { ERROR_CODES, type ErrorCode } from './error-catalog.js';
export { PenstockError, PenstockUsageError, PenstockSystemError, CudaError, CuFileError, AbortError } from './vocabulary/errors.js';
export type { CudaStatus, CuFileStatus, CuFileDriverProps, NativeDeviceInfo as DeviceInfo } from './addon/binding.js';
export { exportDeviceBuffer, importDeviceBuffer, liveIpcExports, IpcExport, IPC_ERROR_CODES, parseIpcHandle, encodeIpcHandle, type IpcHandle, type IpcImportOptions } from './ipc/handles.js';
export {
  startServer, ServeDaemon, connectServer, ServeClient, ServedTensorSet, ResidentSets, defaultSocketPath, SERVE_ERROR_CODES, SERVE_PROTOCOL_VERSION,
  type ServeOptions, type ServeBudget, type ResidentSetInfo, type SetSpec, type NormalSpec, type WireRows,
} from './serve/index.js';
export { buildTensorManifest, exportTensorSet, openTensorManifest, parseTensorManifest, TensorSetExport, ImportedTensorSet, type ExportTensorSetOptions, type TensorRecord, type TensorManifest, type ManifestTensor, type OpenedTensor } from './ipc/manifest.js';
export * from './sources/remote/index.js';
export * from './tensors/index.js';
