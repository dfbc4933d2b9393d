// The generated llama's weights (scripts/tiny-model/llama-weights.ts, the very arrays its ONNX
// files were built from) written as llama.cpp GGUF v3 files: F32, F16, Q8_0 and Q4_0, so that
// llama.cpp and our engine run the same model in one benchmark run.
// Ported from ../shared/tools/llamacpp-anchor (gguf-writer.mjs: encoders byte-identical to
// llama.cpp's gguf-py; random-llama.mjs: the Q/K row permutation and the synthetic vocabulary).
//
// Layouts: our ONNX MatMul weights are W[K, N] row-major (B operand of x·B); GGUF stores the
// PyTorch nn.Linear layout [N][K] row-major (ne = [K, N]), i.e. the transpose. q_proj/k_proj rows
// are then permuted from Hugging Face's rotate-half RoPE to llama.cpp's adjacent-pair layout, as
// convert_hf_to_gguf.py does. The embedding [V, C] and the norms are identical.
import { closeSync, mkdirSync, openSync, renameSync, writeSync } from "node:fs";
import path from "node:path";
import { toFloat16Array, toFloat16Bits } from "../../../workers/engine/model/float16";
import type { LlamaShape, LlamaWeights } from "../../tiny-model/llama-weights";

export type GgufKind = "f32" | "f16" | "q8_0" | "q4_0";
export const GGUF_KINDS: readonly GgufKind[] = ["f32", "f16", "q8_0", "q4_0"];

const T = { UINT32: 4, INT32: 5, FLOAT32: 6, BOOL: 7, STRING: 8, ARRAY: 9, UINT64: 10 } as const;
const GGML = { F32: 0, F16: 1, Q4_0: 2, Q8_0: 8 } as const;
const GGML_OF: Record<GgufKind, number> = { f32: GGML.F32, f16: GGML.F16, q8_0: GGML.Q8_0, q4_0: GGML.Q4_0 };
/** llama_ftype: ALL_F32, MOSTLY_F16, MOSTLY_Q8_0, MOSTLY_Q4_0. */
const FTYPE_OF: Record<GgufKind, number> = { f32: 0, f16: 1, q8_0: 7, q4_0: 2 };
/** [bytes per block, elements per block] per ggml type. */
const BLOCK: Record<number, [number, number]> = { 0: [4, 1], 1: [2, 1], 2: [18, 32], 8: [34, 32] };
const ALIGN = 32;

type Kv =
  | { key: string; type: typeof T.UINT32 | typeof T.INT32 | typeof T.FLOAT32 | typeof T.UINT64; value: number }
  | { key: string; type: typeof T.BOOL; value: boolean }
  | { key: string; type: typeof T.STRING; value: string }
  | { key: string; type: typeof T.ARRAY; itemType: number; value: (string | number)[] };

class Bytes {
  private chunks: Buffer[] = [];
  length = 0;
  push(b: Buffer) {
    this.chunks.push(b);
    this.length += b.length;
  }
  num(type: number, v: number) {
    const b = Buffer.alloc(type === T.UINT64 ? 8 : 4);
    if (type === T.UINT32) b.writeUInt32LE(v >>> 0);
    else if (type === T.INT32) b.writeInt32LE(v | 0);
    else if (type === T.FLOAT32) b.writeFloatLE(v);
    else b.writeBigUInt64LE(BigInt(v));
    this.push(b);
  }
  str(s: string) {
    const e = Buffer.from(s, "utf8");
    this.num(T.UINT64, e.length);
    this.push(e);
  }
  value(type: number, v: string | number | boolean) {
    if (type === T.STRING) this.str(v as string);
    else if (type === T.BOOL) this.push(Buffer.from([v ? 1 : 0]));
    else this.num(type, v as number);
  }
  concat() {
    return Buffer.concat(this.chunks, this.length);
  }
}

const pad = (n: number) => (ALIGN - (n % ALIGN)) % ALIGN;

function tensorBytes(type: number, ne: number[]): number {
  const [bs, be] = BLOCK[type];
  if (ne[0] % be !== 0) throw new Error(`ne0=${ne[0]} is not a multiple of the block size ${be}`);
  return (ne.reduce((a, b) => a * b, 1) / be) * bs;
}

/** A GGUF file written tensor by tensor (the header, with every offset, first). */
class GgufFile {
  private fd: number;
  private next = 0;
  constructor(
    readonly file: string,
    kvs: Kv[],
    private readonly tensors: { name: string; ne: number[]; type: number }[],
  ) {
    const head = new Bytes();
    head.push(Buffer.from("GGUF", "latin1"));
    head.num(T.UINT32, 3);
    head.num(T.UINT64, tensors.length);
    head.num(T.UINT64, kvs.length);
    for (const kv of kvs) {
      head.str(kv.key);
      head.num(T.UINT32, kv.type);
      if (kv.type === T.ARRAY) {
        head.num(T.UINT32, kv.itemType);
        head.num(T.UINT64, kv.value.length);
        for (const x of kv.value) head.value(kv.itemType, x);
      } else head.value(kv.type, kv.value);
    }
    let offset = 0;
    for (const t of tensors) {
      head.str(t.name);
      head.num(T.UINT32, t.ne.length);
      for (const d of t.ne) head.num(T.UINT64, d);
      head.num(T.UINT32, t.type);
      head.num(T.UINT64, offset);
      const n = tensorBytes(t.type, t.ne);
      offset += n + pad(n);
    }
    const bytes = head.concat();
    this.fd = openSync(file, "w");
    writeSync(this.fd, bytes);
    writeSync(this.fd, Buffer.alloc(pad(bytes.length)));
  }

  /** The next tensor's data, in header order. */
  write(data: Uint8Array) {
    const t = this.tensors[this.next++];
    const n = tensorBytes(t.type, t.ne);
    if (data.byteLength !== n) throw new Error(`${t.name}: ${data.byteLength} bytes, expected ${n}`);
    writeSync(this.fd, data);
    if (pad(n)) writeSync(this.fd, Buffer.alloc(pad(n)));
  }

  close() {
    if (this.next !== this.tensors.length) throw new Error(`${this.file}: ${this.next}/${this.tensors.length} tensors`);
    closeSync(this.fd);
  }
}

// ---- numeric encoders, as ggml's reference implementations ----

/** Round to nearest even, as GGML_FP32_TO_FP16 on F16C hardware (the engine's own encoder). */
export const f32ToF16 = toFloat16Bits;

/** C roundf(): half away from zero. */
const roundAway = (x: number) => (x < 0 ? -Math.round(-x) : Math.round(x));

function toF16(x: Float32Array): Uint8Array {
  const out = toFloat16Array(x);
  return new Uint8Array(out.buffer, out.byteOffset, out.byteLength);
}

/** block_q8_0 { half d; int8 qs[32] } (quantize_row_q8_0_ref). */
function quantizeQ8_0(x: Float32Array): Uint8Array {
  const nb = x.length / 32;
  const out = new Uint8Array(nb * 34);
  const view = new DataView(out.buffer);
  const qs = new Int8Array(out.buffer);
  for (let i = 0; i < nb; i++) {
    let amax = 0;
    for (let j = 0; j < 32; j++) amax = Math.max(amax, Math.abs(x[i * 32 + j]));
    const d = Math.fround(amax / 127);
    const id = d ? Math.fround(1 / d) : 0;
    view.setUint16(i * 34, f32ToF16(d), true);
    for (let j = 0; j < 32; j++) qs[i * 34 + 2 + j] = roundAway(Math.fround(x[i * 32 + j] * id));
  }
  return out;
}

/** block_q4_0 { half d; uint8 qs[16] }: low nibble = element j, high = j + 16 (quantize_row_q4_0_ref). */
function quantizeQ4_0(x: Float32Array): Uint8Array {
  const nb = x.length / 32;
  const out = new Uint8Array(nb * 18);
  const view = new DataView(out.buffer);
  for (let i = 0; i < nb; i++) {
    let amax = 0;
    let max = 0;
    for (let j = 0; j < 32; j++) {
      const v = x[i * 32 + j];
      if (Math.abs(v) > amax) {
        amax = Math.abs(v);
        max = v;
      }
    }
    const d = Math.fround(max / -8);
    const id = d ? Math.fround(1 / d) : 0;
    view.setUint16(i * 18, f32ToF16(d), true);
    for (let j = 0; j < 16; j++) {
      const x0 = Math.fround(x[i * 32 + j] * id);
      const x1 = Math.fround(x[i * 32 + 16 + j] * id);
      const q0 = Math.min(15, Math.trunc(Math.fround(x0 + 8.5)));
      const q1 = Math.min(15, Math.trunc(Math.fround(x1 + 8.5)));
      out[i * 18 + 2 + j] = q0 | (q1 << 4);
    }
  }
  return out;
}

function encode(kind: GgufKind, x: Float32Array): Uint8Array {
  if (kind === "f32") return new Uint8Array(x.buffer, x.byteOffset, x.byteLength);
  if (kind === "f16") return toF16(x);
  return kind === "q8_0" ? quantizeQ8_0(x) : quantizeQ4_0(x);
}

// ---- layouts ----

/** ONNX W[K, N] → GGUF [N][K] (row-major). */
export function transpose(w: Float32Array, K: number, N: number): Float32Array {
  const out = new Float32Array(w.length);
  for (let k = 0; k < K; k++) {
    const row = k * N;
    for (let n = 0; n < N; n++) out[n * K + k] = w[row + n];
  }
  return out;
}

/** Rows of a [heads * D][K] weight: rotate-half order → llama.cpp's adjacent pairs (convert_hf_to_gguf's permute). */
export function permuteQK(w: Float32Array, heads: number, rowLen: number): Float32Array {
  const rows = w.length / rowLen;
  const hd = rows / heads;
  const half = hd / 2;
  const out = new Float32Array(w.length);
  for (let h = 0; h < heads; h++)
    for (let i = 0; i < half; i++)
      for (let two = 0; two < 2; two++) {
        const src = h * hd + two * half + i;
        const dst = h * hd + i * 2 + two;
        out.set(w.subarray(src * rowLen, (src + 1) * rowLen), dst * rowLen);
      }
  return out;
}

/**
 * A SentencePiece-style ("llama") vocabulary of V pieces: <unk>, <s>, </s>, the 256 byte tokens,
 * then unique dummy pieces; `eosId` becomes the control token <|endoftext|> (our model's EOS).
 * llama-bench and id-level parity need ids only: no text is ever tokenized by llama.cpp.
 */
export function syntheticVocab(V: number, eosId: number) {
  const tokens = ["<unk>", "<s>", "</s>"];
  const types = [2, 3, 3];
  for (let b = 0; b < 256; b++) {
    tokens.push(`<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`);
    types.push(6);
  }
  const seen = new Set(tokens);
  const push = (s: string) => {
    if (tokens.length < V && !seen.has(s)) {
      seen.add(s);
      tokens.push(s);
      types.push(1);
    }
  };
  const W = "\u2581";
  const letters = "abcdefghijklmnopqrstuvwxyz";
  push(W);
  for (let c = 33; c < 127; c++) push(String.fromCharCode(c));
  for (const a of letters) push(W + a);
  for (const a of letters)
    for (const b of letters) {
      push(a + b);
      push(W + a + b);
    }
  for (let i = 0; tokens.length < V; i++) push(`${W}tok${i}`);
  if (eosId >= 259) {
    tokens[eosId] = "<|endoftext|>";
    types[eosId] = 3;
  }
  const scores = tokens.map((_, i) => (i < 259 ? 0 : -i));
  return { tokens: tokens.slice(0, V), types: types.slice(0, V), scores: scores.slice(0, V) };
}

/** Tensors in GGUF order with their data in GGUF layout (F32), produced one at a time. */
function ggufTensors(s: LlamaShape, w: LlamaWeights) {
  const C = s.hidden;
  const D = C / s.heads;
  const list: { name: string; ne: number[]; matrix: boolean; data: () => Float32Array }[] = [];
  const linear = (name: string, wk: Float32Array, K: number, N: number, qkHeads = 0) =>
    list.push({
      name,
      ne: [K, N],
      matrix: true,
      data: () => (qkHeads ? permuteQK(transpose(wk, K, N), qkHeads, K) : transpose(wk, K, N)),
    });
  const norm = (name: string, g: Float32Array) => list.push({ name, ne: [g.length], matrix: false, data: () => g });
  list.push({ name: "token_embd.weight", ne: [C, s.vocabSize], matrix: true, data: () => w.embed });
  w.layers.forEach((l, i) => {
    const p = `blk.${i}.`;
    norm(p + "attn_norm.weight", l.attnNorm);
    linear(p + "attn_q.weight", l.wq, C, s.heads * D, s.heads);
    linear(p + "attn_k.weight", l.wk, C, s.kvHeads * D, s.kvHeads);
    linear(p + "attn_v.weight", l.wv, C, s.kvHeads * D);
    linear(p + "attn_output.weight", l.wo, s.heads * D, C);
    norm(p + "ffn_norm.weight", l.mlpNorm);
    linear(p + "ffn_gate.weight", l.wg, C, s.ffn);
    linear(p + "ffn_up.weight", l.wu, C, s.ffn);
    linear(p + "ffn_down.weight", l.wd, s.ffn, C);
  });
  norm("output_norm.weight", w.finalNorm);
  linear("output.weight", w.lmHead, C, s.vocabSize);
  return list;
}

function metadata(s: LlamaShape, kind: GgufKind, eosId: number): Kv[] {
  const voc = syntheticVocab(s.vocabSize, eosId);
  const u = (key: string, value: number): Kv => ({ key, type: T.UINT32, value });
  return [
    { key: "general.architecture", type: T.STRING, value: "llama" },
    { key: "general.name", type: T.STRING, value: `lmp-generated-llama-${kind}` },
    u("general.file_type", FTYPE_OF[kind]),
    u("general.quantization_version", 2),
    u("llama.vocab_size", s.vocabSize),
    u("llama.context_length", s.maxPositions),
    u("llama.embedding_length", s.hidden),
    u("llama.block_count", s.layers),
    u("llama.feed_forward_length", s.ffn),
    u("llama.attention.head_count", s.heads),
    u("llama.attention.head_count_kv", s.kvHeads),
    u("llama.rope.dimension_count", s.hidden / s.heads),
    { key: "llama.rope.freq_base", type: T.FLOAT32, value: s.ropeTheta },
    { key: "llama.attention.layer_norm_rms_epsilon", type: T.FLOAT32, value: s.rmsEps },
    { key: "tokenizer.ggml.model", type: T.STRING, value: "llama" },
    { key: "tokenizer.ggml.tokens", type: T.ARRAY, itemType: T.STRING, value: voc.tokens },
    { key: "tokenizer.ggml.scores", type: T.ARRAY, itemType: T.FLOAT32, value: voc.scores },
    { key: "tokenizer.ggml.token_type", type: T.ARRAY, itemType: T.INT32, value: voc.types },
    u("tokenizer.ggml.unknown_token_id", 0),
    u("tokenizer.ggml.bos_token_id", eosId),
    u("tokenizer.ggml.eos_token_id", eosId),
    { key: "tokenizer.ggml.add_bos_token", type: T.BOOL, value: false },
    { key: "tokenizer.ggml.add_eos_token", type: T.BOOL, value: false },
  ];
}

/**
 * Writes `<dir>/model-<kind>.gguf` for each kind (one pass over the weights; each file is
 * written under a scratch name and renamed when complete). Norms stay F32, as llama-quantize
 * does; every matrix (embedding and output included) takes the file's type.
 */
export function writeGgufFiles(
  dir: string,
  s: LlamaShape,
  w: LlamaWeights,
  eosId: number,
  kinds: readonly GgufKind[],
): Record<GgufKind, string> {
  mkdirSync(dir, { recursive: true });
  const tensors = ggufTensors(s, w);
  const files = kinds.map((kind) => {
    const file = path.join(dir, `model-${kind}.gguf`);
    const infos = tensors.map((t) => ({ name: t.name, ne: t.ne, type: t.matrix ? GGML_OF[kind] : GGML.F32 }));
    return { kind, file, out: new GgufFile(`${file}.tmp-${process.pid}`, metadata(s, kind, eosId), infos) };
  });
  for (const t of tensors) {
    const data = t.data();
    for (const f of files) f.out.write(t.matrix ? encode(f.kind, data) : encode("f32", data));
  }
  const out = {} as Record<GgufKind, string>;
  for (const f of files) {
    f.out.close();
    renameSync(f.out.file, f.file);
    out[f.kind] = f.file;
  }
  return out;
}
