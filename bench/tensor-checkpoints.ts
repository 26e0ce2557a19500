/**
 * Model-shaped checkpoints written on the machine that measures them (and by the tests that need
 * one): a 7B-style layout (embeddings 32000×4096, per layer q/k/v/o 4096×4096 and MLP 11008×4096
 * in bf16, norms), the same at any size, with a tensor of each other common dtype for hand-offs,
 * and an MoE-style one with many small expert matrices. The one safetensors writer of bench and
 * tests alike for files of that size (test/tensor-writer.ts writes the small and malformed ones). Bytes are a deterministic stream per tensor
 * (AES-CTR keyed by the name), so a single file and its shards hold identical tensors, and a
 * misplaced tensor never hashes like its neighbour.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { type Dtype } from '../src/index.js';
import { byteLengthOf } from '../src/formats.js';

/** A tensor to write. */
export interface TensorShape {
  name: string;
  dtype: Dtype;
  shape: number[];
}

/** Dimensions of a decoder-only model's layout. */
export interface DecoderDims {
  hidden: number;
  intermediate: number;
  vocab: number;
  layers: number;
}

/** The 7B model's dimensions (32 layers in the real model; ≈ 386 MiB each). */
const SEVEN_B = { hidden: 4096, intermediate: 11008, vocab: 32000 };

/** A layer's attention projections, `h`×`h` each. */
function attention(prefix: string, h: number): TensorShape[] {
  return ['q', 'k', 'v', 'o'].map((x) => ({ name: `${prefix}.self_attn.${x}_proj.weight`, dtype: 'BF16', shape: [h, h] }));
}

/** A decoder-only layout: embeddings, per layer attention, MLP and norms in bf16, a final norm and head. */
export function decoderShapes(d: DecoderDims): TensorShape[] {
  const { hidden: h, intermediate: ff, vocab } = d;
  const out: TensorShape[] = [{ name: 'model.embed_tokens.weight', dtype: 'BF16', shape: [vocab, h] }];
  for (let i = 0; i < d.layers; i++) {
    const p = `model.layers.${i}`;
    out.push(...attention(p, h));
    out.push({ name: `${p}.mlp.gate_proj.weight`, dtype: 'BF16', shape: [ff, h] });
    out.push({ name: `${p}.mlp.up_proj.weight`, dtype: 'BF16', shape: [ff, h] });
    out.push({ name: `${p}.mlp.down_proj.weight`, dtype: 'BF16', shape: [h, ff] });
    out.push({ name: `${p}.input_layernorm.weight`, dtype: 'BF16', shape: [h] });
    out.push({ name: `${p}.post_attention_layernorm.weight`, dtype: 'BF16', shape: [h] });
  }
  out.push({ name: 'model.norm.weight', dtype: 'BF16', shape: [h] });
  out.push({ name: 'lm_head.weight', dtype: 'BF16', shape: [vocab, h] });
  return out;
}

/** The 7B-style layout with `layers` decoder layers. */
export function sevenBShapes(layers: number): TensorShape[] {
  return decoderShapes({ ...SEVEN_B, layers });
}

/** Decoder dimensions for a file of about `bytes`: the 7B model's from 2 GiB up, a quarter-width model below. */
export function decoderDimsFor(bytes: number): DecoderDims {
  const dims = bytes >= 2 ** 31 ? SEVEN_B : { hidden: 1024, intermediate: 2816, vocab: 8000 };
  const perLayer = (4 * dims.hidden * dims.hidden + 3 * dims.hidden * dims.intermediate + 2 * dims.hidden) * 2;
  const layers = Math.max(1, Math.round((bytes - 2 * dims.vocab * dims.hidden * 2) / perLayer));
  return { ...dims, layers };
}

/**
 * The hand-off layout (CUDA IPC tests and `bench:ipc`): a decoder layout plus one small tensor
 * of each other dtype a consumer must rebuild (F32, F16, an I64 scalar, BOOL, F8_E4M3).
 */
export function handOffShapes(d: DecoderDims): TensorShape[] {
  const h = d.hidden;
  return [
    ...decoderShapes(d),
    { name: 'extra.rotary_inv_freq', dtype: 'F32', shape: [Math.max(1, h / 64)] },
    { name: 'extra.half', dtype: 'F16', shape: [3, 7] },
    { name: 'extra.step', dtype: 'I64', shape: [] },
    { name: 'extra.mask', dtype: 'BOOL', shape: [5, 3] },
    { name: 'extra.fp8', dtype: 'F8_E4M3', shape: [h] },
  ];
}

/** An MoE-style layout: per layer attention, a router, and `experts` × (gate, up, down) of 512×1024. */
export function moeShapes(layers: number, experts: number): TensorShape[] {
  const h = 1024;
  const e = 512;
  const out: TensorShape[] = [{ name: 'model.embed_tokens.weight', dtype: 'BF16', shape: [32000, h] }];
  for (let i = 0; i < layers; i++) {
    const p = `model.layers.${i}`;
    out.push(...attention(p, h));
    out.push({ name: `${p}.mlp.gate.weight`, dtype: 'BF16', shape: [experts, h] });
    for (let j = 0; j < experts; j++) {
      out.push({ name: `${p}.mlp.experts.${j}.gate_proj.weight`, dtype: 'BF16', shape: [e, h] });
      out.push({ name: `${p}.mlp.experts.${j}.up_proj.weight`, dtype: 'BF16', shape: [e, h] });
      out.push({ name: `${p}.mlp.experts.${j}.down_proj.weight`, dtype: 'BF16', shape: [h, e] });
    }
    out.push({ name: `${p}.input_layernorm.weight`, dtype: 'BF16', shape: [h] });
    out.push({ name: `${p}.post_attention_layernorm.weight`, dtype: 'BF16', shape: [h] });
  }
  out.push({ name: 'lm_head.weight', dtype: 'BF16', shape: [32000, h] });
  return out;
}

/** Bytes of a tensor. */
export function sizeOf(t: TensorShape): number {
  return byteLengthOf(t.dtype, t.shape.reduce((a, b) => a * b, 1))!;
}

/** Total tensor bytes of a layout. */
export function totalBytes(tensors: readonly TensorShape[]): number {
  return tensors.reduce((a, t) => a + sizeOf(t), 0);
}

const PIECE = 16 << 20;
const zeros = Buffer.alloc(PIECE);

/** Streams a tensor's deterministic bytes to `fd` at `offset`. */
function writeTensorBytes(fd: number, t: TensorShape, offset: number): void {
  const key = crypto.createHash('sha256').update(t.name).digest();
  const c = crypto.createCipheriv('aes-128-ctr', key.subarray(0, 16), key.subarray(16, 32));
  let left = sizeOf(t);
  let pos = offset;
  while (left > 0) {
    const n = Math.min(PIECE, left);
    const chunk = c.update(zeros.subarray(0, n));
    fs.writeSync(fd, chunk, 0, chunk.length, pos);
    pos += chunk.length;
    left -= chunk.length;
  }
}

/** A tensor to write: its bytes as given, or without `data` the deterministic stream of its name. */
export interface TensorToWrite extends TensorShape {
  /** The tensor's bytes (their length is what the header states). */
  data?: Buffer;
}

/** How {@link writeSafetensorsFile} lays a file out. */
export interface SafetensorsLayout {
  /** The header's `__metadata__` (none when absent). */
  metadata?: Record<string, string>;
  /** Spaces after the header JSON. Default: those that 8-align the data section, as writers pad it; other counts misalign it. */
  padding?: number;
  /** Bytes left between consecutive tensors. */
  gap?: number;
  /** Write the data in reverse header order. */
  reverse?: boolean;
  /** fsync before closing, so that a measurement starts from a file on disk. */
  sync?: boolean;
}

/** Bytes a tensor to write occupies. */
function lengthOf(t: TensorToWrite): number {
  return t.data ? t.data.length : sizeOf(t);
}

/**
 * Writes one safetensors file: the 8-byte little-endian header length, the header JSON (tensors
 * in the order given) and its padding, then every tensor's bytes. Returns where the data section
 * starts.
 */
export function writeSafetensorsFile(file: string, tensors: readonly TensorToWrite[], o: SafetensorsLayout = {}): { dataStart: number } {
  const gap = o.gap ?? 0;
  const offsets = new Map<TensorToWrite, number>();
  let end = 0;
  for (const t of o.reverse ? [...tensors].reverse() : tensors) {
    offsets.set(t, end);
    end += lengthOf(t) + gap;
  }
  end = Math.max(0, end - gap);
  const header: Record<string, unknown> = {};
  if (o.metadata) header.__metadata__ = o.metadata;
  for (const t of tensors) header[t.name] = { dtype: t.dtype, shape: t.shape, data_offsets: [offsets.get(t)!, offsets.get(t)! + lengthOf(t)] };
  const json = JSON.stringify(header);
  const padding = o.padding ?? (8 - ((8 + Buffer.byteLength(json)) % 8)) % 8;
  const head = Buffer.from(json + ' '.repeat(padding), 'utf8');
  const dataStart = 8 + head.length;
  const fd = fs.openSync(file, 'w');
  try {
    const len = Buffer.alloc(8);
    len.writeBigUInt64LE(BigInt(head.length));
    fs.writeSync(fd, len, 0, 8, 0);
    fs.writeSync(fd, head, 0, head.length, 8);
    for (const t of tensors) {
      const at = dataStart + offsets.get(t)!;
      if (!t.data) writeTensorBytes(fd, t, at);
      else if (t.data.length > 0) fs.writeSync(fd, t.data, 0, t.data.length, at);
    }
    fs.ftruncateSync(fd, dataStart + end);
    if (o.sync) fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
  return { dataStart };
}

/** Writes one model checkpoint file of `tensors` (packed in order, 8-aligned data section, on disk). */
export function writeCheckpointFile(file: string, tensors: readonly TensorShape[]): void {
  writeSafetensorsFile(file, tensors, { metadata: { format: 'pt' }, sync: true });
}

/**
 * Writes each group as one shard (`model-0000k-of-0000n.safetensors`, through `write`) and the
 * sharded index over them; returns the index path and the files.
 */
export function writeShards<T extends TensorToWrite>(dir: string, groups: readonly (readonly T[])[], write: (file: string, group: readonly T[]) => void): { index: string; files: string[] } {
  fs.mkdirSync(dir, { recursive: true });
  const weightMap: Record<string, string> = {};
  const files: string[] = [];
  let total = 0;
  groups.forEach((g, i) => {
    const name = `model-${String(i + 1).padStart(5, '0')}-of-${String(groups.length).padStart(5, '0')}.safetensors`;
    write(path.join(dir, name), g);
    files.push(path.join(dir, name));
    for (const t of g) {
      weightMap[t.name] = name;
      total += lengthOf(t);
    }
  });
  const index = path.join(dir, 'model.safetensors.index.json');
  fs.writeFileSync(index, JSON.stringify({ metadata: { total_size: total }, weight_map: weightMap }, null, 2));
  return { index, files };
}

/** Writes `shards` model checkpoint files of about equal size and their index. */
export function writeShardedCheckpoint(dir: string, tensors: readonly TensorShape[], shards: number): { index: string; files: string[] } {
  const total = totalBytes(tensors);
  const groups: TensorShape[][] = Array.from({ length: shards }, () => []);
  let acc = 0;
  for (const t of tensors) {
    groups[Math.min(shards - 1, Math.floor((acc * shards) / total))]!.push(t);
    acc += sizeOf(t);
  }
  return writeShards(dir, groups, writeCheckpointFile);
}
