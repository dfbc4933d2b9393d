// Weight quantizers in the formats real ONNX exports use: per-tensor 8-bit for MatMulInteger
// (onnxruntime's quantize_dynamic: model_quantized / model_int8 / model_uint8) and 4-bit blocks
// for com.microsoft MatMulNBits (model_q4 / model_q4f16 and model_q2 / model_q2f16, symmetric,
// onnxruntime's default zero point).

/** W [K, N] row-major → int8 symmetric, zero point 0. */
export function quantizeInt8(w: Float32Array): { q: Int8Array; scale: number } {
  let amax = 0;
  for (const v of w) amax = Math.max(amax, Math.abs(v));
  const scale = amax > 0 ? amax / 127 : 1;
  const q = new Int8Array(w.length);
  for (let i = 0; i < w.length; i++) q[i] = Math.max(-127, Math.min(127, Math.round(w[i] / scale)));
  return { q, scale };
}

/** W [K, N] → uint8 asymmetric over [min(w, 0), max(w, 0)]. */
export function quantizeUint8(w: Float32Array): { q: Uint8Array; scale: number; zeroPoint: number } {
  let lo = 0;
  let hi = 0;
  for (const v of w) {
    lo = Math.min(lo, v);
    hi = Math.max(hi, v);
  }
  const scale = hi > lo ? (hi - lo) / 255 : 1;
  const zeroPoint = Math.max(0, Math.min(255, Math.round(-lo / scale)));
  const q = new Uint8Array(w.length);
  for (let i = 0; i < w.length; i++) q[i] = Math.max(0, Math.min(255, Math.round(w[i] / scale) + zeroPoint));
  return { q, scale, zeroPoint };
}

/**
 * W [K, N] → MatMulNBits' B [N, K / block, block × bits / 8] (values packed from the low bits of
 * each byte up) and scales [N * K / block]; value = (q - 2^(bits-1)) * scale, onnxruntime's
 * default zero point. bits 4: model_q4 / model_q4f16; bits 2: model_q2 / model_q2f16.
 */
export function quantizeBlocks(w: Float32Array, K: number, N: number, bits: 2 | 4 = 4, block = 32) {
  if (K % block !== 0) throw new Error(`K (${K}) must be a multiple of the block size (${block})`);
  const blocks = K / block;
  const blob = (block * bits) / 8;
  const zeroPoint = 2 ** (bits - 1);
  const top = 2 ** bits - 1;
  const packed = new Uint8Array(N * blocks * blob);
  const scales = new Float32Array(N * blocks);
  for (let n = 0; n < N; n++) {
    for (let b = 0; b < blocks; b++) {
      let amax = 0;
      for (let i = 0; i < block; i++) amax = Math.max(amax, Math.abs(w[(b * block + i) * N + n]));
      const scale = amax > 0 ? amax / (zeroPoint - 1) : 1;
      scales[n * blocks + b] = scale;
      const base = (n * blocks + b) * blob;
      for (let i = 0; i < block; i++) {
        const q = Math.max(0, Math.min(top, Math.round(w[(b * block + i) * N + n] / scale) + zeroPoint));
        const bit = i * bits;
        packed[base + (bit >> 3)] |= q << (bit & 7);
      }
    }
  }
  return { packed, scales, blocks, blob };
}
