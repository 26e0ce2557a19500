/**
 * `penstock serve`: a daemon keeping tensor sets resident in GPU memory, its protocol, and the
 * Node client.
 */
export { startServer, ServeDaemon, type ServeOptions } from './server.js';
export { connectServer, ServeClient, ServedTensorSet } from './client.js';
export { ResidentSets, type ServeBudget, type ResidentSetInfo, type Grant, type ResidencyCounters } from './resident-sets.js';
export { defaultSocketPath } from './socket-path.js';
export {
  SERVE_ERROR_CODES, SERVE_PROTOCOL_VERSION, SERVE_OPS, MAX_REQUEST_BYTES, MAX_ANSWER_BYTES, normalizeSpec, specKey, parseRequest,
  type SetSpec, type NormalSpec, type WireRows, type ServeOp, type ServeRequest,
} from './protocol.js';
