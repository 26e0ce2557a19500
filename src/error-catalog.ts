/**
 * Every error code penstock throws, gathered from the tables of the modules that throw them.
 * A module that adds codes exports an `as const` table of them (code → one-line meaning) and is
 * listed in {@link ERROR_CODE_TABLES}; a test fails for any `ERR_PENSTOCK_*` literal in `src/`
 * missing here, and the error table of docs/errors.md is generated from this list.
 */
import { BATCH_ERROR_CODES } from './engine/batch/batch-read.js';
import { CORE_ERROR_CODES } from './vocabulary/errors.js';
import { SETTINGS_ERROR_CODES } from './settings/config.js';
import { OPTION_ERROR_CODES } from './settings/option-keys.js';
import { HOST_MEMORY_ERROR_CODES } from './memory/host-memory.js';
import { IPC_ERROR_CODES } from './ipc/format.js';
import { REMOTE_ERROR_CODES } from './sources/remote/errors.js';
import { TENSOR_ERROR_CODES } from './formats/errors.js';
import { SERVE_ERROR_CODES } from './serve/protocol.js';

/** The contributing tables, by the part of penstock that throws their codes. */
export const ERROR_CODE_TABLES = {
  core: CORE_ERROR_CODES,
  settings: SETTINGS_ERROR_CODES,
  options: OPTION_ERROR_CODES,
  hostMemory: HOST_MEMORY_ERROR_CODES,
  batch: BATCH_ERROR_CODES,
  ipc: IPC_ERROR_CODES,
  remote: REMOTE_ERROR_CODES,
  tensors: TENSOR_ERROR_CODES,
  serve: SERVE_ERROR_CODES,
} as const;

type Tables = typeof ERROR_CODE_TABLES;
type UnionToIntersection<U> = (U extends unknown ? (x: U) => void : never) extends (x: infer I) => void ? I : never;

/** Every error code penstock throws, with its one-line meaning. */
export const ERROR_CODES: Readonly<UnionToIntersection<Tables[keyof Tables]>> = Object.freeze(
  Object.assign({}, ...Object.values(ERROR_CODE_TABLES)),
);

/** A code penstock throws (`err.code` of a penstock error, besides OS, CUDA and cuFile names). */
export type ErrorCode = keyof typeof ERROR_CODES;

/** The error table as Markdown (what docs/errors.md shows between its `errors` markers). */
export function errorTableMarkdown(): string {
  const rows = Object.entries(ERROR_CODES as Record<string, string>).map(([code, meaning]) => `| \`${code}\` | ${meaning.replaceAll('|', '\\|')} |`);
  return ['| code | meaning |', '| --- | --- |', ...rows].join('\n');
}
