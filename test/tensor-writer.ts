/**
 * Test-side safetensors files, sharded checkpoints and .npy files: small tensors with known bytes,
 * in the odd layouts real files have (padding that misaligns the data, gaps, reversed order),
 * written by the project's safetensors writer (bench/tensor-checkpoints.ts); and raw headers, so
 * that malformed files can be written too.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import { writeSafetensorsFile, writeShards, type SafetensorsLayout, type TensorToWrite } from '../bench/tensor-checkpoints.js';
import { byteLengthOf } from '../src/formats.js';

/** A tensor to write; without `data`, {@link tensorBytes} of its name. */
export type TensorSpec = TensorToWrite;

/** The layout knobs (bench/tensor-checkpoints.ts); `padding` defaults to none here, so the data section may start misaligned. */
export type WriteOptions = Omit<SafetensorsLayout, 'sync'>;

/** Deterministic bytes for a tensor (from its name). */
export function tensorBytes(name: string, size: number): Buffer {
  const out = Buffer.allocUnsafe(size);
  let off = 0;
  for (let i = 0; off < size; i++) {
    const h = crypto.createHash('sha256').update(`${name}#${i}`).digest();
    off += h.copy(out, off, 0, Math.min(h.length, size - off));
  }
  return out;
}

/** Fills in data for specs that have none. */
export function withData(specs: TensorSpec[]): Required<TensorSpec>[] {
  return specs.map((s) => {
    const n = byteLengthOf(s.dtype, s.shape.reduce((a, b) => a * b, 1));
    if (n === undefined) throw new Error(`test spec ${s.name}: sub-byte tensor does not fill bytes`);
    return { ...s, data: s.data ?? tensorBytes(s.name, n) };
  });
}

/** Writes a safetensors file; returns the tensors with their data and the data section's start. */
export function writeSafetensors(file: string, specs: TensorSpec[], o: WriteOptions = {}): { tensors: Required<TensorSpec>[]; dataStart: number } {
  const tensors = withData(specs);
  const { dataStart } = writeSafetensorsFile(file, tensors, { ...o, padding: o.padding ?? 0 });
  return { tensors, dataStart };
}

/** Writes a file whose header is exactly `headerText` (or bytes), followed by `dataBytes` bytes. */
export function writeRawSafetensors(file: string, header: string | Buffer, dataBytes = 0, lengthField?: bigint): void {
  const json = typeof header === 'string' ? Buffer.from(header, 'utf8') : header;
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(lengthField ?? BigInt(json.length));
  fs.writeFileSync(file, Buffer.concat([len, json, Buffer.alloc(dataBytes, 7)]));
}

/** Writes a sharded checkpoint of `shards` files (tensors split by count, in order) and its index. */
export function writeSharded(dir: string, specs: TensorSpec[], shards: number, o: WriteOptions = {}): { index: string; files: string[]; tensors: Required<TensorSpec>[] } {
  const tensors = withData(specs);
  const groups = Array.from({ length: shards }, (_, s) => tensors.filter((_, i) => Math.floor((i * shards) / tensors.length) === s));
  return { ...writeShards(dir, groups, (file, group) => writeSafetensors(file, [...group], o)), tensors };
}

/** Writes a .npy file of the given version with a raw descr; data is written as given. */
export function writeNpy(file: string, descr: string, shape: number[], data: Buffer, o: { version?: 1 | 2 | 3; fortran?: boolean } = {}): void {
  const version = o.version ?? 1;
  const shapeText = shape.length === 1 ? `(${shape[0]},)` : `(${shape.join(', ')})`;
  let dict = `{'descr': '${descr}', 'fortran_order': ${o.fortran ? 'True' : 'False'}, 'shape': ${shapeText}, }`;
  const pre = version === 1 ? 10 : 12;
  const pad = (64 - ((pre + dict.length + 1) % 64)) % 64;
  dict += ' '.repeat(pad) + '\n';
  const head = Buffer.alloc(pre);
  Buffer.from([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, version, 0]).copy(head);
  if (version === 1) head.writeUInt16LE(dict.length, 8);
  else head.writeUInt32LE(dict.length, 8);
  fs.writeFileSync(file, Buffer.concat([head, Buffer.from(dict, version === 3 ? 'utf8' : 'latin1'), data]));
}

/** Every tensor's bytes in a safetensors file, cut by its header's offsets (without penstock's parser). */
export function fileTensors(file: string): Map<string, Buffer> {
  const bytes = fs.readFileSync(file);
  const headerLength = Number(bytes.readBigUInt64LE(0));
  const header = JSON.parse(bytes.subarray(8, 8 + headerLength).toString('utf8')) as Record<string, { data_offsets: [number, number] }>;
  const out = new Map<string, Buffer>();
  for (const [name, entry] of Object.entries(header))
    if (name !== '__metadata__') out.set(name, bytes.subarray(8 + headerLength + entry.data_offsets[0], 8 + headerLength + entry.data_offsets[1]));
  return out;
}
