// IEEE 754 half precision <-> float32. onnxruntime-node hands float16 tensors over as
// Uint16Array bit patterns (Node 20 has no Float16Array): the engine widens fp16 logits with a
// 65,536-entry table, and the test-model generator narrows weights with round-to-nearest-even.
const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** The float16 bit pattern nearest to `value` (ties to even; overflow to ±Infinity). */
export function toFloat16Bits(value: number): number {
  f32[0] = value;
  const x = u32[0];
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  let mant = x & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0);
  const e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - e;
    let half = mant >>> shift;
    const rest = mant & ((1 << shift) - 1);
    const halfway = 1 << (shift - 1);
    if (rest > halfway || (rest === halfway && half & 1)) half++;
    return sign | half;
  }
  let half = (e << 10) | (mant >>> 13);
  const rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest === 0x1000 && half & 1)) half++; // a carry rounds up into the exponent
  return sign | half;
}

export function toFloat16Array(values: Float32Array): Uint16Array {
  const out = new Uint16Array(values.length);
  for (let i = 0; i < values.length; i++) out[i] = toFloat16Bits(values[i]);
  return out;
}

let table: Float32Array | null = null;

/** float16 bit pattern → float32 value, for all 65,536 patterns. */
export function float16Table(): Float32Array {
  if (table) return table;
  table = new Float32Array(65536);
  for (let h = 0; h < 65536; h++) {
    const sign = h & 0x8000 ? -1 : 1;
    const exp = (h >>> 10) & 0x1f;
    const mant = h & 0x3ff;
    if (exp === 0) table[h] = sign * mant * 2 ** -24;
    else if (exp === 0x1f) table[h] = mant ? NaN : sign * Infinity;
    else table[h] = sign * (1 + mant / 1024) * 2 ** (exp - 15);
  }
  return table;
}

/** Widens `src` into `dst` (same length). */
export function float16ToFloat32(src: Uint16Array, dst: Float32Array): Float32Array {
  const t = float16Table();
  for (let i = 0; i < src.length; i++) dst[i] = t[src[i]];
  return dst;
}
