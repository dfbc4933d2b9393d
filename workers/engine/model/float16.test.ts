import { describe, expect, it } from "vitest";
import { float16Table, float16ToFloat32, toFloat16Array, toFloat16Bits } from "./float16";

describe("float16", () => {
  it("encodes exactly representable values, rounding ties to even, overflow and subnormals", () => {
    expect(toFloat16Bits(1)).toBe(0x3c00);
    expect(toFloat16Bits(-2)).toBe(0xc000);
    expect(toFloat16Bits(65504)).toBe(0x7bff);
    expect(toFloat16Bits(65520)).toBe(0x7c00); // rounds up past the largest finite value
    expect(toFloat16Bits(Infinity)).toBe(0x7c00);
    expect(toFloat16Bits(-Infinity)).toBe(0xfc00);
    expect(toFloat16Bits(NaN) & 0x7c00).toBe(0x7c00);
    expect(toFloat16Bits(2 ** -24)).toBe(0x0001); // smallest subnormal
    expect(toFloat16Bits(2 ** -26)).toBe(0x0000);
    expect(toFloat16Bits(1 + 2 ** -11)).toBe(0x3c00); // tie between 1 and 1+2^-10: to even (1)
    expect(toFloat16Bits(1 + 3 * 2 ** -11)).toBe(0x3c02); // tie: to even (1+2^-9)
  });

  it("every float16 value survives a round trip through float32", () => {
    const table = float16Table();
    for (let h = 0; h < 65536; h++) {
      if (Number.isNaN(table[h])) continue;
      expect(toFloat16Bits(table[h])).toBe(h === 0x8000 ? 0x8000 : h);
    }
  });

  it("widens arrays and is within half an ulp for arbitrary values", () => {
    const values = Float32Array.from({ length: 1000 }, (_, i) => Math.sin(i) * 10 ** ((i % 9) - 4));
    const back = float16ToFloat32(toFloat16Array(values), new Float32Array(values.length));
    values.forEach((v, i) =>
      expect(Math.abs(back[i] - v)).toBeLessThanOrEqual(Math.max(Math.abs(v) * 2 ** -11, 2 ** -25)),
    );
  });
});
