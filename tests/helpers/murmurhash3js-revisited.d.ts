/** The reference MurmurHash3 in JavaScript (devDependency), which workers/packager/murmur3.ts is checked against. */
declare module "murmurhash3js-revisited" {
  const murmur: {
    x86: { hash128(bytes: Uint8Array, seed?: number): string };
  };
  export default murmur;
}
