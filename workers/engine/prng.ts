// Seeded PRNG (xoshiro128**, seeded through splitmix32) so a `seed` reproduces a sample exactly.
export interface Prng {
  /** Uniform in [0, 1). */
  next(): number;
}

function splitmix32(seed: number) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x9e3779b9) >>> 0;
    let z = s;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
    return (z ^ (z >>> 16)) >>> 0;
  };
}

export function createPrng(seed: number, stream = 0): Prng {
  const mix = splitmix32((seed ^ Math.imul(stream + 1, 0x27d4eb2d)) >>> 0);
  let a = mix(),
    b = mix(),
    c = mix(),
    d = mix();
  // Seeds go up to 2^53: the bits above the low 32 are mixed in too (seed 1 and 2^32 + 1 differ).
  // Nothing changes for seeds below 2^32, whose samples stay what they were.
  const high = Math.floor(seed / 4294967296) >>> 0;
  if (high !== 0) {
    const more = splitmix32(high ^ 0x5bd1e995);
    a ^= more();
    b ^= more();
    c ^= more();
    d ^= more();
  }
  if ((a | b | c | d) === 0) a = 1;
  return {
    next() {
      const result = Math.imul(rotl(Math.imul(b, 5), 7), 9) >>> 0;
      const t = b << 9;
      c ^= a;
      d ^= b;
      b ^= c;
      a ^= d;
      c ^= t;
      d = rotl(d, 11);
      return result / 4294967296;
    },
  };
}

const rotl = (x: number, k: number) => (x << k) | (x >>> (32 - k));

export const randomSeed = () => Math.floor(Math.random() * 2 ** 31);
