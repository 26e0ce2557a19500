/**
 * A model-shaped safetensors checkpoint for the IPC hand-off measurements and GPU tests:
 * written here (decoder layers of BF16 projections and norms, an embedding and a head, plus a
 * few tensors of other dtypes), loaded into one GPU slab with penstock, and described by
 * tensor records for `buildTensorManifest`.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import { readFileToDevice, type DeviceBuffer, type TensorRecord } from '../src/index.js';

/** Dimensions of the layout; bytes come out near `layers × (4·h² + 3·h·i) × 2`. */
export interface CheckpointShape {
  hidden: number;
  intermediate: number;
  vocab: number;
  layers: number;
}

const DTYPE_BYTES: Record<string, number> = { BF16: 2, F16: 2, F32: 4, I64: 8, BOOL: 1, F8_E4M3: 1 };

/** A 7B-like shape scaled so that the file holds about `bytes`. */
export function shapeFor(bytes: number): CheckpointShape {
  const big = bytes >= 2 ** 31;
  const hidden = big ? 4096 : 1024;
  const intermediate = big ? 11008 : 2816;
  const vocab = big ? 32000 : 8000;
  const perLayer = (4 * hidden * hidden + 3 * hidden * intermediate + 2 * hidden) * 2;
  const layers = Math.max(1, Math.round((bytes - 2 * vocab * hidden * 2) / perLayer));
  return { hidden, intermediate, vocab, layers };
}

function tensorList(s: CheckpointShape): Array<{ name: string; dtype: string; shape: number[] }> {
  const { hidden: h, intermediate: i, vocab: v } = s;
  const list = [{ name: 'model.embed_tokens.weight', dtype: 'BF16', shape: [v, h] }];
  for (let l = 0; l < s.layers; l++) {
    const p = `model.layers.${l}`;
    list.push(
      { name: `${p}.input_layernorm.weight`, dtype: 'BF16', shape: [h] },
      { name: `${p}.self_attn.q_proj.weight`, dtype: 'BF16', shape: [h, h] },
      { name: `${p}.self_attn.k_proj.weight`, dtype: 'BF16', shape: [h, h] },
      { name: `${p}.self_attn.v_proj.weight`, dtype: 'BF16', shape: [h, h] },
      { name: `${p}.self_attn.o_proj.weight`, dtype: 'BF16', shape: [h, h] },
      { name: `${p}.mlp.gate_proj.weight`, dtype: 'BF16', shape: [i, h] },
      { name: `${p}.mlp.up_proj.weight`, dtype: 'BF16', shape: [i, h] },
      { name: `${p}.mlp.down_proj.weight`, dtype: 'BF16', shape: [h, i] },
      { name: `${p}.post_attention_layernorm.weight`, dtype: 'BF16', shape: [h] },
    );
  }
  list.push(
    { name: 'model.norm.weight', dtype: 'BF16', shape: [h] },
    { name: 'lm_head.weight', dtype: 'BF16', shape: [v, h] },
    { name: 'extra.rotary_inv_freq', dtype: 'F32', shape: [h / 64] },
    { name: 'extra.half', dtype: 'F16', shape: [3, 7] },
    { name: 'extra.step', dtype: 'I64', shape: [] },
    { name: 'extra.mask', dtype: 'BOOL', shape: [5, 3] },
    { name: 'extra.fp8', dtype: 'F8_E4M3', shape: [h] },
  );
  return list;
}

/** A written checkpoint: where its data section starts, and its tensors relative to that. */
export interface Checkpoint {
  file: string;
  dataStart: number;
  records: TensorRecord[];
  bytes: number;
}

/** Writes a checkpoint of random bytes (every bit pattern, NaNs included, compares bitwise). */
export function writeCheckpoint(file: string, shape: CheckpointShape): Checkpoint {
  const header: Record<string, unknown> = { __metadata__: { format: 'pt' } };
  const records: TensorRecord[] = [];
  let offset = 0;
  for (const t of tensorList(shape)) {
    const byteLength = t.shape.reduce((a, d) => a * d, 1) * DTYPE_BYTES[t.dtype]!;
    header[t.name] = { dtype: t.dtype, shape: t.shape, data_offsets: [offset, offset + byteLength] };
    records.push({ ...t, byteOffset: offset, byteLength });
    offset += byteLength;
  }
  let json = JSON.stringify(header);
  json += ' '.repeat((8 - ((8 + json.length) % 8)) % 8); // the data section 8-aligned, as writers pad it
  const head = Buffer.alloc(8 + json.length);
  head.writeBigUInt64LE(BigInt(json.length), 0);
  head.write(json, 8, 'utf8');
  const fd = fs.openSync(file, 'w');
  try {
    fs.writeSync(fd, head, 0, head.length, 0);
    const block = crypto.randomBytes(16 << 20);
    for (let done = 0, k = 0; done < offset; k++) {
      // Rotate the block each time so that no two tensors share content.
      const shift = (k * 4099) % block.length;
      const piece = Buffer.concat([block.subarray(shift), block.subarray(0, shift)]).subarray(0, Math.min(block.length, offset - done));
      fs.writeSync(fd, piece, 0, piece.length, head.length + done);
      done += piece.length;
    }
  } finally {
    fs.closeSync(fd);
  }
  return { file, dataStart: head.length, records, bytes: head.length + offset };
}

/** The whole file in GPU memory, and the slab (data section) view the records refer to. */
export async function loadCheckpoint(c: Checkpoint, device = 0): Promise<{ whole: DeviceBuffer; slab: DeviceBuffer }> {
  const whole = await readFileToDevice(c.file, { device });
  return { whole, slab: whole.subarray(c.dataStart) };
}
