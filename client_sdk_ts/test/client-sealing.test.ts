/** Sealed envelopes reproduce conformance/sealed.json byte for byte (fixed ephemeral key and nonce words). */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { hexToBytes } from "@noble/hashes/utils";
import { keyIdOf, sealPayload } from "../src/sealing.js";
import { HmacWordSource } from "../src/words.js";

interface Case {
  campaign: string;
  config_id: string;
  payload: unknown;
  nonce_words_key: string;
  ephemeral_secret_key: string;
  plaintext: string;
  envelope: { key_id: string; sealed: string };
}
const vectors = JSON.parse(readFileSync(new URL("../../../conformance/sealed.json", import.meta.url), "utf8")) as {
  public_key: string;
  key_id: string;
  cases: Case[];
};

test("every case of conformance/sealed.json is reproduced exactly", () => {
  assert.ok(vectors.cases.length >= 3);
  for (const c of vectors.cases) {
    const size = new TextEncoder().encode(c.plaintext).length;
    const key = { publicKey: vectors.public_key, keyId: vectors.key_id, campaign: c.campaign, configId: c.config_id, size };
    const envelope = sealPayload(c.payload, key, new HmacWordSource(hexToBytes(c.nonce_words_key)), hexToBytes(c.ephemeral_secret_key));
    assert.deepEqual(envelope, c.envelope, c.campaign);
  }
});

test("a key that does not match its id, or a payload over the bound, is refused", () => {
  const c = vectors.cases[0] as Case;
  const size = new TextEncoder().encode(c.plaintext).length;
  const words = new HmacWordSource(hexToBytes(c.nonce_words_key));
  const key = { publicKey: vectors.public_key, keyId: "0".repeat(16), campaign: c.campaign, configId: c.config_id, size };
  assert.throws(() => sealPayload(c.payload, key, words), /public_key does not match key_id/);
  assert.throws(() => sealPayload("x".repeat(size), { ...key, keyId: vectors.key_id }, words), /bytes more than the campaign's largest/);
  assert.equal(keyIdOf(new Uint8Array(32)).length, 16);
});
