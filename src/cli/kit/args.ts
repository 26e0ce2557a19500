/** Argument helpers shared by `penstock bench` and the benchmark suite. */
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { parseSize } from '../../settings/config.js';

/** A bad command line: the message is shown as is, and the exit status is 2. */
export class ArgError extends Error {
  override name = 'ArgError';
}

/** node:util parseArgs, with its errors turned into ArgError. */
export function parseCommandLine<T extends ParseArgsConfig>(config: T): ReturnType<typeof parseArgs<T>> {
  try {
    return parseArgs(config);
  } catch (err) {
    throw new ArgError((err as Error).message);
  }
}

export function parseIntArg(text: string, name: string, min: number, max: number): number {
  const n = /^\s*\d+\s*$/.test(text) ? Number(text) : Number.NaN;
  if (!Number.isSafeInteger(n) || n < min || n > max) throw new ArgError(`${name} must be an integer from ${min} to ${max}, got '${text}'`);
  return n;
}

export function parseSizeArg(text: string, name: string, min = 1): number {
  let n: number;
  try {
    n = parseSize(text);
  } catch {
    throw new ArgError(`${name} is not a size: '${text}' (try 4KiB, 64MiB, 1GiB)`);
  }
  if (!Number.isSafeInteger(n) || n < min) throw new ArgError(`${name} must be at least ${min} bytes, got '${text}'`);
  return n;
}

function splitList(text: string, name: string): string[] {
  const items = text.split(',').map((s) => s.trim());
  if (items.length === 0 || items.some((s) => s === '')) throw new ArgError(`${name} must be a comma-separated list, got '${text}'`);
  return items;
}

/** Integers, duplicates dropped, order kept (it is the order the configurations run in). */
export function parseIntList(text: string, name: string, min: number, max: number): number[] {
  return [...new Set(splitList(text, name).map((s) => parseIntArg(s, name, min, max)))];
}

export function parseSizeList(text: string, name: string, min = 1): number[] {
  return [...new Set(splitList(text, name).map((s) => parseSizeArg(s, name, min)))];
}

export function oneOf<T extends string>(text: string, name: string, allowed: readonly T[]): T {
  if (!(allowed as readonly string[]).includes(text)) throw new ArgError(`${name} must be one of ${allowed.join(', ')}, got '${text}'`);
  return text as T;
}

/** Where a command puts data: `--host`, or GPU `--device N` (default 0). */
export interface TargetArgs {
  /** True for host memory. */
  host: boolean;
  /** The GPU ordinal, when `--device` was given. */
  device?: number;
}

/** `--device N` and `--host` (which exclude each other), the same in every command. */
export function parseTarget(values: Readonly<Record<string, string | true | undefined>>): TargetArgs {
  const host = values.host === true;
  const device = values.device;
  if (host && device !== undefined) throw new ArgError('--device and --host exclude each other');
  if (typeof device === 'string') return { host, device: parseIntArg(device, '--device', 0, 1023) };
  return { host };
}
