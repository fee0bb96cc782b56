/** HPKE base mode against RFC 9180's A.1.1 vector (vendored in tests/client_sdk/dap/). */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";

import { fromHex, toHex } from "../src/wire.js";
import { HpkeError, checkSuite, deriveKeyPair, sealBase } from "../src/dap/hpke.js";

const VECTOR = JSON.parse(
  readFileSync(resolve(dirname(fileURLToPath(import.meta.url)), "..", "..", "..", "tests", "client_sdk", "dap", "hpke_rfc9180_a1_base.json"), "utf-8"),
) as Record<string, string> & { mode: number; kem_id: number; kdf_id: number; aead_id: number; encryptions: { pt: string; aad: string; ct: string; sequence_number: number }[] };

test("the vector's suite is the one supported, base mode", () => {
  assert.equal(VECTOR.mode, 0);
  checkSuite(VECTOR.kem_id, VECTOR.kdf_id, VECTOR.aead_id);
});

test("DeriveKeyPair reproduces the vector's receiver and ephemeral keys", () => {
  const r = deriveKeyPair(fromHex(VECTOR.ikmR as string));
  assert.equal(toHex(r.publicKey), VECTOR.pkRm);
  assert.equal(toHex(r.privateKey), VECTOR.skRm);
  const e = deriveKeyPair(fromHex(VECTOR.ikmE as string));
  assert.equal(toHex(e.publicKey), VECTOR.pkEm);
  assert.equal(toHex(e.privateKey), VECTOR.skEm);
});

test("SealBase reproduces the vector's enc and first ciphertext", async () => {
  const first = VECTOR.encryptions[0];
  assert.ok(first !== undefined && first.sequence_number === 0);
  const [enc, ct] = await sealBase(fromHex(VECTOR.pkRm as string), fromHex(VECTOR.info as string), fromHex(first.aad), fromHex(first.pt), fromHex(VECTOR.ikmE as string));
  assert.equal(toHex(enc), VECTOR.enc);
  assert.equal(toHex(ct), first.ct);
});

test("a random ephemeral key by default: two seals differ", async () => {
  const pk = fromHex(VECTOR.pkRm as string);
  const [enc1, ct1] = await sealBase(pk, new Uint8Array(0), new Uint8Array(0), new Uint8Array(8));
  const [enc2, ct2] = await sealBase(pk, new Uint8Array(0), new Uint8Array(0), new Uint8Array(8));
  assert.notEqual(toHex(enc1), toHex(enc2));
  assert.notEqual(toHex(ct1), toHex(ct2));
  assert.equal(ct1.length, 8 + 16);
});

test("other suites and bad keys are refused by name", async () => {
  assert.throws(() => checkSuite(0x0010, 1, 1), (e: Error) => e instanceof HpkeError && /kem_id 0x0010: only 0x0020/.test(e.message));
  assert.throws(() => checkSuite(0x0020, 1, 0x0003), /aead_id 0x0003/);
  await assert.rejects(sealBase(new Uint8Array(31), new Uint8Array(0), new Uint8Array(0), new Uint8Array(1)), /public_key must be a Uint8Array of 32 bytes .*got 31 bytes/);
  await assert.rejects(sealBase(new Uint8Array(32), new Uint8Array(0), new Uint8Array(0), new Uint8Array(1)), HpkeError);
});
