/**
 * The demo's checkpoint: a safetensors file shaped like a small decoder-only language model
 * (token embeddings, per layer attention and MLP projections and two norms, a final norm and an
 * output head), of about the size asked for, filled with random bytes. Written in pieces with
 * awaits between them, so that a signal can stop the writing and remove the file at once.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';

/** The demo checkpoint's size when --size is not given: a few seconds at most on a small machine. */
export const DEMO_DEFAULT_SIZE = '32MiB';

/** One tensor of the demo checkpoint. */
export interface DemoTensor {
  /** Its name, as a Hugging Face checkpoint of this shape would have it. */
  readonly name: string;
  /** BF16 for weights, F32 for norms. */
  readonly dtype: 'BF16' | 'F32';
  /** Its shape. */
  readonly shape: readonly number[];
  /** Its size in bytes. */
  readonly bytes: number;
}

/** The model's dimensions and its tensors, in file order. */
export interface DemoModel {
  /** Hidden size. */
  readonly hidden: number;
  /** Decoder layers. */
  readonly layers: number;
  /** Vocabulary size. */
  readonly vocab: number;
  /** Every tensor, in the order the file holds them. */
  readonly tensors: readonly DemoTensor[];
  /** The sum of the tensors' sizes. */
  readonly bytes: number;
}

function tensor(name: string, dtype: 'BF16' | 'F32', shape: number[]): DemoTensor {
  return { name, dtype, shape, bytes: shape.reduce((a, b) => a * b, 1) * (dtype === 'BF16' ? 2 : 4) };
}

/**
 * A model of at most about `size` bytes: a hidden size (a multiple of 64, up to 4096) that leaves
 * room for the embeddings, the head and about four layers, then as many layers as fit.
 */
export function demoModel(size: number): DemoModel {
  // Per hidden² (BF16): embeddings and head 2 × 8 × 2 = 32; a layer (4 attention + 3 MLP of 2.75×)
  // 24.5. The hidden size is chosen so that about four layers fit, the vocabulary is 8 × hidden.
  let hidden = Math.floor(Math.sqrt(size / (32 + 4 * 24.5)) / 64) * 64;
  hidden = Math.min(4096, Math.max(64, hidden));
  const vocab = 8 * hidden;
  const mlp = Math.round((hidden * 2.75) / 64) * 64;
  const layerBytes = (4 * hidden * hidden + 3 * hidden * mlp) * 2 + 2 * hidden * 4;
  const layers = Math.max(1, Math.floor((size - 2 * vocab * hidden * 2) / layerBytes));
  const tensors: DemoTensor[] = [tensor('model.embed_tokens.weight', 'BF16', [vocab, hidden])];
  for (let i = 0; i < layers; i++) {
    const p = `model.layers.${i}`;
    tensors.push(
      tensor(`${p}.input_layernorm.weight`, 'F32', [hidden]),
      tensor(`${p}.self_attn.q_proj.weight`, 'BF16', [hidden, hidden]),
      tensor(`${p}.self_attn.k_proj.weight`, 'BF16', [hidden, hidden]),
      tensor(`${p}.self_attn.v_proj.weight`, 'BF16', [hidden, hidden]),
      tensor(`${p}.self_attn.o_proj.weight`, 'BF16', [hidden, hidden]),
      tensor(`${p}.post_attention_layernorm.weight`, 'F32', [hidden]),
      tensor(`${p}.mlp.gate_proj.weight`, 'BF16', [mlp, hidden]),
      tensor(`${p}.mlp.up_proj.weight`, 'BF16', [mlp, hidden]),
      tensor(`${p}.mlp.down_proj.weight`, 'BF16', [hidden, mlp]),
    );
  }
  tensors.push(tensor('model.norm.weight', 'F32', [hidden]), tensor('lm_head.weight', 'BF16', [vocab, hidden]));
  return { hidden, layers, vocab, tensors, bytes: tensors.reduce((a, t) => a + t.bytes, 0) };
}

/** The safetensors header of `model`: the length prefix and the JSON, padded to 8 bytes. */
export function safetensorsHeader(model: DemoModel): Buffer {
  const header: Record<string, unknown> = { __metadata__: { format: 'pt', source: 'penstock demo' } };
  let offset = 0;
  for (const t of model.tensors) {
    header[t.name] = { dtype: t.dtype, shape: t.shape, data_offsets: [offset, offset + t.bytes] };
    offset += t.bytes;
  }
  let json = JSON.stringify(header);
  json += ' '.repeat((8 - (json.length % 8)) % 8);
  const out = Buffer.alloc(8 + json.length);
  out.writeBigUInt64LE(BigInt(json.length), 0);
  out.write(json, 8, 'latin1');
  return out;
}

const PIECE = 4 << 20;

/**
 * Writes `model` with random tensor data into the open descriptor `fd`, calling `onProgress` with
 * the bytes written so far.
 */
export async function writeDemoCheckpoint(fd: number, model: DemoModel, onProgress?: (done: number, total: number) => void): Promise<void> {
  const header = safetensorsHeader(model);
  const total = header.length + model.bytes;
  await write(fd, header, 0);
  const piece = Buffer.allocUnsafeSlow(Math.min(PIECE, Math.max(1, model.bytes)));
  for (let off = 0; off < model.bytes; off += PIECE) {
    const n = Math.min(PIECE, model.bytes - off);
    crypto.randomFillSync(piece, 0, n);
    await write(fd, piece.subarray(0, n), header.length + off);
    onProgress?.(header.length + off + n, total);
  }
}

function write(fd: number, data: Buffer, position: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const step = (done: number): void => {
      if (done === data.length) return resolve();
      fs.write(fd, data, done, data.length - done, position + done, (err, n) => (err ? reject(err) : step(done + n)));
    };
    step(0);
  });
}
