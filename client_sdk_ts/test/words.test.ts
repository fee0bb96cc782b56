import { test } from "node:test";
import assert from "node:assert/strict";
import { HmacWordSource, CryptoWordSource } from "../src/words.js";
import { hmac } from "@noble/hashes/hmac";
import { sha256 } from "@noble/hashes/sha256";

test("HmacWordSource: block i is HMAC-SHA256(key, i big-endian), four little-endian words", () => {
  const key = new Uint8Array(32).map((_, i) => i);
  const source = new HmacWordSource(key);
  const first = source.words(3);
  const rest = source.words(6); // crosses into block 1 and 2
  const expected: bigint[] = [];
  for (let block = 0n; block < 3n; block++) {
    const counter = new Uint8Array(8);
    new DataView(counter.buffer).setBigUint64(0, block, false);
    const mac = hmac(sha256, key, counter);
    const view = new DataView(mac.buffer, mac.byteOffset);
    for (let i = 0; i < 4; i++) expected.push(view.getBigUint64(8 * i, true));
  }
  assert.deepEqual([...first, ...rest], expected.slice(0, 9));
});

test("HmacWordSource refuses a short key", () => {
  assert.throws(() => new HmacWordSource(new Uint8Array(15)), /at least 16 bytes/);
});

test("CryptoWordSource gives distinct words", () => {
  const words = new CryptoWordSource().words(10000);
  assert.equal(new Set(words).size, 10000);
});
