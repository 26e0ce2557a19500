/**
 * Test-side writers of safetensors files, sharded checkpoints and .npy files, with knobs for
 * the odd layouts real files have (padding that misaligns the data, gaps, reversed order) and
 * for raw headers, so malformed files can be written too.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { byteLengthOf, type Dtype } from '../src/index.js';

export interface TensorSpec {
  name: string;
  dtype: Dtype;
  shape: number[];
  /** The bytes (default: deterministic pseudo-random bytes of the right length). */
  data?: Buffer;
}

export interface WriteOptions {
  metadata?: Record<string, string>;
  /** Spaces added after the JSON (any number: the data section then starts misaligned). */
  padding?: number;
  /** Bytes left between consecutive tensors. */
  gap?: number;
  /** Write the data in reverse header order. */
  reverse?: boolean;
}

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
  const order = o.reverse ? [...tensors].reverse() : tensors;
  const offsets = new Map<string, [number, number]>();
  let pos = 0;
  for (const t of order) {
    offsets.set(t.name, [pos, pos + t.data.length]);
    pos += t.data.length + (o.gap ?? 0);
  }
  const header: Record<string, unknown> = {};
  if (o.metadata) header.__metadata__ = o.metadata;
  for (const t of tensors) header[t.name] = { dtype: t.dtype, shape: t.shape, data_offsets: offsets.get(t.name) };
  const json = Buffer.from(JSON.stringify(header) + ' '.repeat(o.padding ?? 0), 'utf8');
  const dataStart = 8 + json.length;
  const fd = fs.openSync(file, 'w');
  try {
    const len = Buffer.alloc(8);
    len.writeBigUInt64LE(BigInt(json.length));
    fs.writeSync(fd, len, 0, 8, 0);
    fs.writeSync(fd, json, 0, json.length, 8);
    for (const t of tensors) if (t.data.length) fs.writeSync(fd, t.data, 0, t.data.length, dataStart + offsets.get(t.name)![0]);
    fs.ftruncateSync(fd, dataStart + Math.max(0, pos - (o.gap ?? 0)));
  } finally {
    fs.closeSync(fd);
  }
  return { tensors, dataStart };
}

/** Writes a file whose header is exactly `headerText` (or bytes), followed by `dataBytes` bytes. */
export function writeRawSafetensors(file: string, header: string | Buffer, dataBytes = 0, lengthField?: bigint): void {
  const json = typeof header === 'string' ? Buffer.from(header, 'utf8') : header;
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(lengthField ?? BigInt(json.length));
  fs.writeFileSync(file, Buffer.concat([len, json, Buffer.alloc(dataBytes, 7)]));
}

/** Writes a sharded checkpoint of `shards` files and its index; returns the index path. */
export function writeSharded(dir: string, specs: TensorSpec[], shards: number, o: WriteOptions = {}): { index: string; files: string[]; tensors: Required<TensorSpec>[] } {
  fs.mkdirSync(dir, { recursive: true });
  const tensors = withData(specs);
  const weightMap: Record<string, string> = {};
  const files: string[] = [];
  let total = 0;
  for (let s = 0; s < shards; s++) {
    const mine = tensors.filter((_, i) => Math.floor((i * shards) / tensors.length) === s);
    const name = `model-${String(s + 1).padStart(5, '0')}-of-${String(shards).padStart(5, '0')}.safetensors`;
    writeSafetensors(path.join(dir, name), mine, o);
    files.push(path.join(dir, name));
    for (const t of mine) {
      weightMap[t.name] = name;
      total += t.data.length;
    }
  }
  const index = path.join(dir, 'model.safetensors.index.json');
  fs.writeFileSync(index, JSON.stringify({ metadata: { total_size: total }, weight_map: weightMap }, null, 2));
  return { index, files, tensors };
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
