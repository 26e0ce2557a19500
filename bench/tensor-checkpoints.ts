/**
 * Model-shaped checkpoints written on the machine that measures them: a 7B-style layout
 * (embeddings 32000×4096, per layer q/k/v/o 4096×4096 and MLP 11008×4096 in bf16, norms) and an
 * MoE-style one with many small expert matrices. Bytes are a deterministic stream per tensor
 * (AES-CTR keyed by the name), so a single file and its shards hold identical tensors, and a
 * misplaced tensor never hashes like its neighbour.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { byteLengthOf, type Dtype } from '../src/index.js';

/** A tensor to write. */
export interface TensorShape {
  name: string;
  dtype: Dtype;
  shape: number[];
}

/** The 7B-style layout with `layers` decoder layers (32 in the real model; ≈ 386 MiB each). */
export function sevenBShapes(layers: number): TensorShape[] {
  const h = 4096;
  const ff = 11008;
  const out: TensorShape[] = [{ name: 'model.embed_tokens.weight', dtype: 'BF16', shape: [32000, h] }];
  for (let i = 0; i < layers; i++) {
    const p = `model.layers.${i}`;
    for (const x of ['q', 'k', 'v', 'o']) out.push({ name: `${p}.self_attn.${x}_proj.weight`, dtype: 'BF16', shape: [h, h] });
    out.push({ name: `${p}.mlp.gate_proj.weight`, dtype: 'BF16', shape: [ff, h] });
    out.push({ name: `${p}.mlp.up_proj.weight`, dtype: 'BF16', shape: [ff, h] });
    out.push({ name: `${p}.mlp.down_proj.weight`, dtype: 'BF16', shape: [h, ff] });
    out.push({ name: `${p}.input_layernorm.weight`, dtype: 'BF16', shape: [h] });
    out.push({ name: `${p}.post_attention_layernorm.weight`, dtype: 'BF16', shape: [h] });
  }
  out.push({ name: 'model.norm.weight', dtype: 'BF16', shape: [h] });
  out.push({ name: 'lm_head.weight', dtype: 'BF16', shape: [32000, h] });
  return out;
}

/** An MoE-style layout: per layer attention, a router, and `experts` × (gate, up, down) of 512×1024. */
export function moeShapes(layers: number, experts: number): TensorShape[] {
  const h = 1024;
  const e = 512;
  const out: TensorShape[] = [{ name: 'model.embed_tokens.weight', dtype: 'BF16', shape: [32000, h] }];
  for (let i = 0; i < layers; i++) {
    const p = `model.layers.${i}`;
    for (const x of ['q', 'k', 'v', 'o']) out.push({ name: `${p}.self_attn.${x}_proj.weight`, dtype: 'BF16', shape: [h, h] });
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

/** Writes one safetensors file of `tensors` (packed in order, 8-aligned data section). */
export function writeCheckpointFile(file: string, tensors: readonly TensorShape[]): void {
  const header: Record<string, unknown> = { __metadata__: { format: 'pt' } };
  let pos = 0;
  for (const t of tensors) {
    header[t.name] = { dtype: t.dtype, shape: t.shape, data_offsets: [pos, pos + sizeOf(t)] };
    pos += sizeOf(t);
  }
  let json = JSON.stringify(header);
  json += ' '.repeat((8 - ((8 + json.length) % 8)) % 8);
  const fd = fs.openSync(file, 'w');
  try {
    const len = Buffer.alloc(8);
    len.writeBigUInt64LE(BigInt(Buffer.byteLength(json)));
    fs.writeSync(fd, len, 0, 8, 0);
    const hb = Buffer.from(json);
    fs.writeSync(fd, hb, 0, hb.length, 8);
    let off = 8 + hb.length;
    for (const t of tensors) {
      writeTensorBytes(fd, t, off);
      off += sizeOf(t);
    }
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

/** Writes `shards` files of about equal size and their index; returns the index path and the files. */
export function writeShardedCheckpoint(dir: string, tensors: readonly TensorShape[], shards: number): { index: string; files: string[] } {
  fs.mkdirSync(dir, { recursive: true });
  const total = totalBytes(tensors);
  const groups: TensorShape[][] = Array.from({ length: shards }, () => []);
  let acc = 0;
  for (const t of tensors) {
    groups[Math.min(shards - 1, Math.floor((acc * shards) / total))]!.push(t);
    acc += sizeOf(t);
  }
  const weightMap: Record<string, string> = {};
  const files: string[] = [];
  groups.forEach((g, i) => {
    const name = `model-${String(i + 1).padStart(5, '0')}-of-${String(shards).padStart(5, '0')}.safetensors`;
    writeCheckpointFile(path.join(dir, name), g);
    files.push(path.join(dir, name));
    for (const t of g) weightMap[t.name] = name;
  });
  const index = path.join(dir, 'model.safetensors.index.json');
  fs.writeFileSync(index, JSON.stringify({ metadata: { total_size: total }, weight_map: weightMap }, null, 2));
  return { index, files };
}
