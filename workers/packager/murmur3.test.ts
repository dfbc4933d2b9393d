import murmur from "murmurhash3js-revisited";
import { describe, expect, it } from "vitest";
import { murmur3x86128 } from "./murmur3";

const hex = (bytes: Uint8Array, length: number, seed: number) => {
  const out = new Int32Array(4);
  murmur3x86128(bytes, length, seed, out);
  return [...out].map((w) => (w >>> 0).toString(16).padStart(8, "0")).join("");
};

describe("MurmurHash3 x86-128", () => {
  it("gives the reference implementation's digests (its published vectors)", () => {
    const vectors: [string, string][] = [
      ["I will not buy this tobacconist's, it is scratched.", "9b5b7ba2ef3f7866889adeaf00f3f98e"],
      ["", "00000000000000000000000000000000"],
      ["0", "0ab2409ea5eb34f8a5eb34f8a5eb34f8"],
      ["0123", "dc378fea485d3536485d3536485d3536"],
      ["01234", "35c5b3ee7b3b211600ae108800ae1088"],
      ["012345678", "571b5f6775d48126d0205c304ca675dc"],
    ];
    for (const [text, digest] of vectors) {
      const bytes = Buffer.from(text);
      expect(hex(bytes, bytes.length, 0)).toBe(digest);
    }
  });

  it("agrees with murmurhash3js-revisited on every length of a block and its tail, any seed and byte", () => {
    let state = 7;
    const next = () => (state = (Math.imul(state, 1103515245) + 12345) >>> 0);
    for (let length = 0; length < 100; length++) {
      for (const seed of [0, 1, 0x9747b28c, 0xffffffff]) {
        const bytes = Uint8Array.from({ length: length + 5 }, () => next() >>> 24);
        // Only the first `length` bytes count: a key lives at the start of a larger buffer.
        expect(hex(bytes, length, seed)).toBe(murmur.x86.hash128(bytes.subarray(0, length), seed));
      }
    }
  });
});
