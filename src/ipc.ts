/**
 * `penstock/ipc`: GPU memory handed to another process without a copy (CUDA IPC): buffers, and
 * whole tensor sets with a manifest of their tensors.
 *
 * @packageDocumentation
 */
export { exportDeviceBuffer, importDeviceBuffer, liveIpcExports, parseIpcHandle, encodeIpcHandle, type IpcExport, type IpcHandle, type IpcImportOptions } from './ipc/handles.js';
export {
  exportTensorSet, buildTensorManifest, openTensorManifest, parseTensorManifest,
  type TensorSetExport, type ImportedTensorSet, type ExportTensorSetOptions, type TensorRecord, type TensorManifest, type ManifestTensor, type OpenedTensor,
} from './ipc/manifest.js';
