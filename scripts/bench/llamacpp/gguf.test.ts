// The GGUF side of `npm run bench -- llamacpp`: ggml's encoders, and that the file written from our
// ONNX-layout weights computes what the ONNX graph computes once llama.cpp reads it its own way.
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { makeLlamaWeights, type LlamaShape } from "../../tiny-model/llama-weights";
import { createRng } from "../../tiny-model/prng";
import { f32ToF16, permuteQK, syntheticVocab, transpose, writeGgufFiles } from "./gguf";

/** A minimal GGUF v3 reader: metadata scalars, array lengths, and each tensor's info and bytes. */
function readGguf(file: string) {
  const b = readFileSync(file);
  let o = 0;
  const u32 = () => ((o += 4), b.readUInt32LE(o - 4));
  const u64 = () => ((o += 8), Number(b.readBigUInt64LE(o - 8)));
  const str = () => {
    const n = u64();
    o += n;
    return b.toString("utf8", o - n, o);
  };
  const value = (type: number): unknown => {
    switch (type) {
      case 4:
        return u32();
      case 5:
        return ((o += 4), b.readInt32LE(o - 4));
      case 6:
        return ((o += 4), b.readFloatLE(o - 4));
      case 7:
        return b[o++] === 1;
      case 8:
        return str();
      case 10:
        return u64();
      case 9: {
        const item = u32();
        const n = u64();
        const items = Array.from({ length: n }, () => value(item));
        return item === 8 ? items : { length: n };
      }
      default:
        throw new Error(`type ${type}`);
    }
  };
  expect(b.toString("latin1", 0, 4)).toBe("GGUF");
  o = 4;
  expect(u32()).toBe(3);
  const nTensors = u64();
  const nKv = u64();
  const meta: Record<string, unknown> = {};
  for (let i = 0; i < nKv; i++) {
    const key = str();
    meta[key] = value(u32());
  }
  const infos = Array.from({ length: nTensors }, () => {
    const name = str();
    const ne = Array.from({ length: u32() }, () => u64());
    return { name, ne, type: u32(), offset: u64() };
  });
  const dataStart = Math.ceil(o / 32) * 32;
  const f32 = (name: string) => {
    const t = infos.find((x) => x.name === name)!;
    expect(t.type).toBe(0);
    const n = t.ne.reduce((a, c) => a * c, 1);
    return new Float32Array(
      b.buffer.slice(b.byteOffset + dataStart + t.offset, b.byteOffset + dataStart + t.offset + 4 * n),
    );
  };
  const raw = (name: string) => {
    const t = infos.find((x) => x.name === name)!;
    return b.subarray(dataStart + t.offset);
  };
  return { meta, infos, f32, raw, size: b.length };
}

const f16ToF32 = (h: number) => {
  const s = h & 0x8000 ? -1 : 1;
  const e = (h >>> 10) & 0x1f;
  const m = h & 0x3ff;
  return e === 0 ? s * m * 2 ** -24 : s * (1 + m / 1024) * 2 ** (e - 15);
};

describe("ggml encoders", () => {
  it("rounds float32 to float16 to nearest even, with subnormals and overflow", () => {
    expect(f32ToF16(1)).toBe(0x3c00);
    expect(f32ToF16(-2)).toBe(0xc000);
    expect(f32ToF16(65504)).toBe(0x7bff);
    expect(f32ToF16(70000)).toBe(0x7c00);
    expect(f32ToF16(1 + 2 ** -11)).toBe(0x3c00); // halfway: to the even neighbour
    expect(f32ToF16(1 + 3 * 2 ** -11)).toBe(0x3c02);
    expect(f32ToF16(2 ** -24)).toBe(0x0001);
    expect(f32ToF16(1e-9)).toBe(0);
  });
});

describe("GGUF from the generated llama's weights", () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "lmp-gguf-test-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const shape: LlamaShape = {
    vocabSize: 300,
    hidden: 64,
    layers: 1,
    heads: 4,
    kvHeads: 2,
    ffn: 96,
    maxPositions: 128,
    ropeTheta: 10000,
    rmsEps: 1e-5,
  };
  const w = makeLlamaWeights(shape, createRng(7), "mixing");
  const files = writeGgufFiles(dir, shape, w, 299, ["f32", "f16", "q8_0", "q4_0"]);

  it("writes llama metadata llama.cpp reads, with our EOS as a control token", () => {
    const g = readGguf(files.f32);
    expect(g.meta["general.architecture"]).toBe("llama");
    expect(g.meta["llama.context_length"]).toBe(128);
    expect(g.meta["llama.attention.head_count_kv"]).toBe(2);
    expect(g.meta["llama.rope.freq_base"]).toBe(10000);
    expect(g.meta["tokenizer.ggml.eos_token_id"]).toBe(299);
    const tokens = g.meta["tokenizer.ggml.tokens"] as string[];
    expect(tokens).toHaveLength(300);
    expect(tokens[299]).toBe("<|endoftext|>");
    expect(new Set(tokens).size).toBe(300);
    expect(g.infos.map((t) => t.name)).toEqual([
      "token_embd.weight",
      ...["attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down"].map(
        (n) => `blk.0.${n}.weight`,
      ),
      "output_norm.weight",
      "output.weight",
    ]);
    expect(g.infos.find((t) => t.name === "blk.0.ffn_down.weight")!.ne).toEqual([96, 64]);
  });

  it("stores each matrix transposed ([N][K]) and the embedding as is", () => {
    const g = readGguf(files.f32);
    expect(g.f32("token_embd.weight")).toEqual(w.embed);
    const down = g.f32("blk.0.ffn_down.weight"); // W [K=96, N=64] → [64][96]
    for (const [k, n] of [
      [0, 0],
      [5, 17],
      [95, 63],
    ])
      expect(down[n * 96 + k]).toBe(w.layers[0].wd[k * 64 + n]);
    expect(g.f32("output.weight")).toEqual(transpose(w.lmHead, 64, 300));
  });

  it("permutes q/k rows so that llama.cpp's pairwise RoPE equals the graph's rotate-half RoPE", () => {
    const g = readGguf(files.f32);
    const D = 16;
    const half = D / 2;
    const x = Float32Array.from({ length: 64 }, (_, i) => Math.sin(i + 1));
    const pos = 5;
    for (const [name, wOnnx, heads] of [
      ["blk.0.attn_q.weight", w.layers[0].wq, 4],
      ["blk.0.attn_k.weight", w.layers[0].wk, 2],
    ] as const) {
      const N = heads * D;
      const ours = new Float64Array(N); // x · W[K, N], then rotate-half (HF)
      for (let n = 0; n < N; n++) for (let k = 0; k < 64; k++) ours[n] += x[k] * wOnnx[k * N + n];
      const theirsW = g.f32(name); // rows [N][K], then adjacent pairs (ggml NORM rope)
      const theirs = new Float64Array(N);
      for (let n = 0; n < N; n++) for (let k = 0; k < 64; k++) theirs[n] += theirsW[n * 64 + k] * x[k];
      for (let h = 0; h < heads; h++)
        for (let i = 0; i < half; i++) {
          const th = pos * 10000 ** (-(2 * i) / D);
          const [c, s] = [Math.cos(th), Math.sin(th)];
          const a = ours[h * D + i];
          const b = ours[h * D + half + i];
          const p = theirs[h * D + 2 * i];
          const q = theirs[h * D + 2 * i + 1];
          expect(p * c - q * s).toBeCloseTo(a * c - b * s, 5);
          expect(q * c + p * s).toBeCloseTo(b * c + a * s, 5);
        }
    }
    expect(permuteQK(Float32Array.from([0, 1, 2, 3]), 1, 1)).toEqual(Float32Array.from([0, 2, 1, 3]));
  });

  it("encodes F16, Q8_0 and Q4_0 blocks in ggml's sizes", () => {
    const params = (g: ReturnType<typeof readGguf>) =>
      g.infos.reduce((a, t) => a + (t.ne.length === 2 ? t.ne[0] * t.ne[1] : 0), 0);
    const f32 = readGguf(files.f32);
    const n = params(f32);
    const sizes = Object.fromEntries(
      (["f16", "q8_0", "q4_0"] as const).map((k) => {
        const g = readGguf(files[k]);
        expect(g.infos.find((t) => t.name === "blk.0.attn_norm.weight")!.type).toBe(0); // norms stay F32
        return [k, g.size];
      }),
    );
    expect(f32.size - sizes.f16).toBeGreaterThanOrEqual(2 * n - 4096);
    expect(sizes.f16 - sizes.q8_0).toBeGreaterThanOrEqual(2 * n - (34 / 32) * n - 4096);
    expect(sizes.q8_0 - sizes.q4_0).toBeGreaterThanOrEqual((16 / 32) * n - 4096);
  });

  it("quantizes Q8_0 and Q4_0 blocks that dequantize to the weights (element order included)", () => {
    const x = readGguf(files.f32).f32("blk.0.attn_v.weight");
    const q8 = readGguf(files.q8_0).raw("blk.0.attn_v.weight");
    const q4 = readGguf(files.q4_0).raw("blk.0.attn_v.weight");
    for (let blk = 0; blk < x.length / 32; blk++) {
      const d8 = f16ToF32(q8.readUInt16LE(blk * 34));
      const d4 = f16ToF32(q4.readUInt16LE(blk * 18));
      for (let j = 0; j < 32; j++) {
        const v = x[blk * 32 + j];
        // half a step, plus the float16 rounding of the stored scale (up to 127 × 2^-11 steps)
        expect(Math.abs(q8.readInt8(blk * 34 + 2 + j) * d8 - v)).toBeLessThanOrEqual(Math.abs(d8) * 0.57 + 1e-7);
        const byte = q4[blk * 18 + 2 + (j % 16)];
        const nibble = j < 16 ? byte & 15 : byte >> 4;
        // the block's largest magnitude maps to -8; its opposite would be +8 and is clamped to 15 (+7)
        const bound = (nibble === 15 ? 1.01 : 0.51) * Math.abs(d4);
        expect(Math.abs((nibble - 8) * d4 - v)).toBeLessThanOrEqual(bound + 1e-7);
      }
    }
  });

  it("builds a unique SentencePiece-style vocabulary of any size", () => {
    const v = syntheticVocab(1201, 1200);
    expect(v.tokens).toHaveLength(1201);
    expect(new Set(v.tokens).size).toBe(1201);
    expect(v.tokens[3]).toBe("<0x00>");
    expect(v.types[1200]).toBe(3);
  });
});
