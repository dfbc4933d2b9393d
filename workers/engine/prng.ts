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
