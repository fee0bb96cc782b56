/**
 * The string mechanisms' own keyed BLAKE2b against Python's hashlib.blake2b
 * (test/fixtures/blake2b-vectors.json, written by make_blake2b_vectors.py): every message length
 * 0..300 (empty, one block, block boundaries, several blocks) under the sketch's and the SFP
 * tag's keys, a 1-byte and a 64-byte key, at digest sizes 1, 4, 8, ..., 64.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { sha256 } from "@noble/hashes/sha256";
import { KeyedBlake2b } from "../src/mechanisms/keyed-blake2b.js";
import { fromHex, toHex } from "../src/wire.js";

interface Vectors {
  keys: string[];
  single: [number, number, number, string][];
  combined: [number, number, string][];
}

/** The fixture sits in test/fixtures/ (not copied by tsc): from dist/test/ go up to the package. */
function vectors(): Vectors {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 3; i++) {
    try {
      return JSON.parse(readFileSync(join(dir, "test", "fixtures", "blake2b-vectors.json"), "utf8")) as Vectors;
    } catch {
      dir = dirname(dir);
    }
  }
  throw new Error("test/fixtures/blake2b-vectors.json not found");
}

/** make_blake2b_vectors.py's `message`. */
function message(length: number): Uint8Array {
  return Uint8Array.from({ length }, (_, i) => (131 * i + 7 * length + 1) % 256);
}

const { keys, single, combined } = vectors();

test("keyed BLAKE2b: each length 0..300 as hashlib.blake2b digests it", () => {
  assert.equal(single.length, 301);
  for (const [k, size, length, digest] of single) {
    const hash = new KeyedBlake2b(fromHex(keys[k] as string, "key"), size);
    assert.equal(toHex(hash.digest(message(length))), digest, `key ${k}, size ${size}, length ${length}`);
  }
});

test("keyed BLAKE2b: every key and digest size over every length 0..300", () => {
  assert.equal(combined.length, 5 * 17);
  for (const [k, size, expected] of combined) {
    const hash = new KeyedBlake2b(fromHex(keys[k] as string, "key"), size);
    const all = new Uint8Array(301 * size);
    for (let length = 0; length <= 300; length++) all.set(hash.digest(message(length)), length * size);
    assert.equal(toHex(sha256(all)), expected, `key ${k}, size ${size}`);
  }
});

test("keyed BLAKE2b: one object hashes many messages independently (no state carried over)", () => {
  const hash = new KeyedBlake2b(fromHex(keys[0] as string, "key"), 16);
  const first = toHex(hash.digest(message(200)));
  hash.digest(message(0));
  hash.digest(message(129));
  assert.equal(toHex(hash.digest(message(200))), first);
});

test("keyed BLAKE2b: words() are the digest's little-endian 32-bit words (the sketch's h_j)", () => {
  for (const size of [4, 16, 64]) {
    const hash = new KeyedBlake2b(fromHex(keys[0] as string, "key"), size);
    for (const length of [0, 5, 128, 129]) {
      const digest = hash.digest(message(length));
      const view = new DataView(digest.buffer);
      const expected = Array.from({ length: size / 4 }, (_, j) => view.getUint32(4 * j, true));
      assert.deepEqual(Array.from(hash.words(message(length))), expected, `size ${size}, length ${length}`);
    }
  }
});

test("keyed BLAKE2b: a key or digest size outside 1..64 bytes is refused", () => {
  assert.throws(() => new KeyedBlake2b(new Uint8Array(0), 4), /key of 1\.\.64 bytes/);
  assert.throws(() => new KeyedBlake2b(new Uint8Array(65), 4), /key of 1\.\.64 bytes/);
  assert.throws(() => new KeyedBlake2b(new Uint8Array(8), 0), /digest of 1\.\.64 bytes/);
  assert.throws(() => new KeyedBlake2b(new Uint8Array(8), 65), /digest of 1\.\.64 bytes/);
});
