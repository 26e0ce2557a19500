/**
 * `penstock/serve`: the daemon of `penstock serve` run inside a program, and what it holds. Its
 * client, `connectServer`, is in `penstock`.
 *
 * @packageDocumentation
 */
export { startServer, type ServeDaemon, type ServeOptions } from './serve/server.js';
export type { ResidentSets, ServeBudget, ResidentSetInfo } from './serve/resident-sets.js';
export { defaultSocketPath } from './serve/socket-path.js';
export { SERVE_PROTOCOL_VERSION, type NormalSpec } from './serve/protocol.js';
