/**
 * Keyed BLAKE2b (RFC 7693) for the string mechanisms' hashes: many short messages under one
 * key. The key block is compressed once per key (every non-empty message starts from that
 * state), so a message of up to 128 bytes costs one compression. 64-bit words are (low, high)
 * pairs of 32-bit lanes. Checked against Python's hashlib.blake2b on every length 0..300, several
 * keys and digest sizes (test/blake2b.test.ts, test/fixtures/make_blake2b_vectors.py).
 */

/** The initialization vector (SHA-512's), as (low, high) pairs. */
const IV = /* @__PURE__ */ Uint32Array.of(
  0xf3bcc908, 0x6a09e667, 0x84caa73b, 0xbb67ae85, 0xfe94f82b, 0x3c6ef372, 0x5f1d36f1, 0xa54ff53a,
  0xade682d1, 0x510e527f, 0x2b3e6c1f, 0x9b05688c, 0xfb41bd6b, 0x1f83d9ab, 0x137e2179, 0x5be0cd19,
);
/** The message schedule of rounds 0..9 (rounds 10 and 11 repeat 0 and 1), one hex digit each. */
const SIGMA = /* @__PURE__ */ Array.from(
  "0123456789abcdefea489fd61c02b753b8c052fdae3671947931dcbe265a40f8905724afe1bc683d" +
    "2c6a0b834d75fe19c51fed4a0763928bdb7ec13950f4862a6fe9b308c2d714a5a2847615fb9e3cd0",
  (digit) => parseInt(digit, 16),
);
const v = /* @__PURE__ */ new Uint32Array(32);
const words = /* @__PURE__ */ new Uint32Array(32);
/** A message block, zero-padded (hashing is synchronous: one buffer serves every call). */
const block = /* @__PURE__ */ new Uint8Array(128);

const TWO_32 = 0x100000000;

/** The mixing function G on words a, b, c, d of v with message words x and y (RFC 7693, 3.1):
 * rotations by 32, 24, 16 and 63 of (low, high) pairs, sums carried from low to high. */
function mix(a: number, b: number, c: number, d: number, x: number, y: number): void {
  let al = v[2 * a]!, ah = v[2 * a + 1]!, bl = v[2 * b]!, bh = v[2 * b + 1]!;
  let cl = v[2 * c]!, ch = v[2 * c + 1]!, dl = v[2 * d]!, dh = v[2 * d + 1]!;
  let t = al + bl + words[2 * x]!;
  ah = (ah + bh + words[2 * x + 1]! + Math.floor(t / TWO_32)) >>> 0;
  al = t >>> 0;
  t = dl ^ al;
  dl = (dh ^ ah) >>> 0;
  dh = t >>> 0;
  t = cl + dl;
  ch = (ch + dh + Math.floor(t / TWO_32)) >>> 0;
  cl = t >>> 0;
  let xl = bl ^ cl, xh = bh ^ ch;
  bl = ((xl >>> 24) | (xh << 8)) >>> 0;
  bh = ((xh >>> 24) | (xl << 8)) >>> 0;
  t = al + bl + words[2 * y]!;
  ah = (ah + bh + words[2 * y + 1]! + Math.floor(t / TWO_32)) >>> 0;
  al = t >>> 0;
  xl = dl ^ al;
  xh = dh ^ ah;
  dl = ((xl >>> 16) | (xh << 16)) >>> 0;
  dh = ((xh >>> 16) | (xl << 16)) >>> 0;
  t = cl + dl;
  ch = (ch + dh + Math.floor(t / TWO_32)) >>> 0;
  cl = t >>> 0;
  xl = bl ^ cl;
  xh = bh ^ ch;
  bl = ((xl << 1) | (xh >>> 31)) >>> 0;
  bh = ((xh << 1) | (xl >>> 31)) >>> 0;
  v[2 * a] = al;
  v[2 * a + 1] = ah;
  v[2 * b] = bl;
  v[2 * b + 1] = bh;
  v[2 * c] = cl;
  v[2 * c + 1] = ch;
  v[2 * d] = dl;
  v[2 * d + 1] = dh;
}

/** The compression function F of `block` (128 bytes) into state `h`, `counter` bytes so far. */
function compress(h: Uint32Array, block: Uint8Array, counter: number, last: boolean): void {
  for (let i = 0; i < 32; i++) {
    words[i] = block[4 * i]! | (block[4 * i + 1]! << 8) | (block[4 * i + 2]! << 16) | (block[4 * i + 3]! << 24);
  }
  v.set(h);
  v.set(IV, 16);
  v[24] = v[24]! ^ counter; // counters below 2^32 (messages of at most 4 GB)
  if (last) {
    v[28] = ~v[28]!;
    v[29] = ~v[29]!;
  }
  for (let round = 0; round < 12; round++) {
    const s = 16 * (round % 10);
    // the columns, then the diagonals, of the 4x4 state
    mix(0, 4, 8, 12, SIGMA[s]!, SIGMA[s + 1]!);
    mix(1, 5, 9, 13, SIGMA[s + 2]!, SIGMA[s + 3]!);
    mix(2, 6, 10, 14, SIGMA[s + 4]!, SIGMA[s + 5]!);
    mix(3, 7, 11, 15, SIGMA[s + 6]!, SIGMA[s + 7]!);
    mix(0, 5, 10, 15, SIGMA[s + 8]!, SIGMA[s + 9]!);
    mix(1, 6, 11, 12, SIGMA[s + 10]!, SIGMA[s + 11]!);
    mix(2, 7, 8, 13, SIGMA[s + 12]!, SIGMA[s + 13]!);
    mix(3, 4, 9, 14, SIGMA[s + 14]!, SIGMA[s + 15]!);
  }
  for (let i = 0; i < 16; i++) h[i] = h[i]! ^ v[i]! ^ v[i + 16]!;
}

/** BLAKE2b with a fixed key (1..64 bytes) and digest size (1..64 bytes). */
export class KeyedBlake2b {
  readonly #dkLen: number;
  /** The parameter block's state with the key block still to compress (empty messages). */
  readonly #start: Uint32Array;
  readonly #keyBlock = new Uint8Array(128);
  /** The state after the key block as a non-final block (every other message). */
  readonly #keyed: Uint32Array;

  constructor(key: Uint8Array, dkLen: number) {
    if (key.length < 1 || key.length > 64 || dkLen < 1 || dkLen > 64) {
      throw new RangeError(`BLAKE2b needs a key of 1..64 bytes and a digest of 1..64 bytes; got ${key.length} and ${dkLen}`);
    }
    this.#dkLen = dkLen;
    this.#start = IV.slice(0, 16);
    this.#start[0] = this.#start[0]! ^ 0x01010000 ^ (key.length << 8) ^ dkLen;
    this.#keyBlock.set(key);
    this.#keyed = this.#start.slice();
    compress(this.#keyed, this.#keyBlock, 128, false);
  }

  /** The digest of ``message``. */
  digest(message: Uint8Array): Uint8Array {
    const h = this.#state(message);
    const out = new Uint8Array(this.#dkLen);
    for (let i = 0; i < out.length; i++) out[i] = h[i >> 2]! >>> (8 * (i & 3));
    return out;
  }

  /** The digest's little-endian 32-bit words (its first ⌊dkLen/4⌋). */
  words(message: Uint8Array): Uint32Array {
    return this.#state(message).subarray(0, this.#dkLen >> 2);
  }

  /** The final state of ``message``: the digest is its first dkLen bytes, little-endian. */
  #state(message: Uint8Array): Uint32Array {
    if (message.length === 0) {
      const h = this.#start.slice();
      compress(h, this.#keyBlock, 128, true);
      return h;
    }
    const h = this.#keyed.slice();
    for (let offset = 0; offset < message.length; offset += 128) {
      const end = Math.min(offset + 128, message.length);
      block.fill(0).set(message.subarray(offset, end));
      compress(h, block, 128 + end, end === message.length);
    }
    return h;
  }
}
