/**
 * HPKE (RFC 9180) base mode for DAP's one suite: DHKEM(X25519, HKDF-SHA256), HKDF-SHA256,
 * AES-128-GCM; the TypeScript twin of the Python SDK's `client_sdk.dap.hpke` (seal side only).
 *
 * X25519 from @noble/curves, HKDF and SHA-256 from @noble/hashes, AES-128-GCM from WebCrypto
 * (`crypto.subtle`, in Node 20 and every browser), so no further dependency.
 */
import { x25519 } from "../x25519.js";
import { expand, extract } from "@noble/hashes/hkdf";
import { sha256 } from "@noble/hashes/sha256";

import { concatBytes } from "../vdaf/xof.js";
import { CryptoWordSource } from "../words.js";

// RFC 9180, Section 7: the codepoints of the suite.
export const KEM_X25519_HKDF_SHA256 = 0x0020;
export const KDF_HKDF_SHA256 = 0x0001;
export const AEAD_AES_128_GCM = 0x0001;
export const X25519_KEY_SIZE = 32;

const MODE_BASE = 0;
const NK = 16; // AES-128-GCM key
const NN = 12; // AES-128-GCM nonce

/** A key, suite or input HPKE cannot use: the message names the field. */
export class HpkeError extends Error {
  override name = "HpkeError";
}

const utf8 = (text: string): Uint8Array => new TextEncoder().encode(text);

function i2osp(value: number, size: number): Uint8Array {
  const out = new Uint8Array(size);
  for (let i = size - 1, v = value; i >= 0; i--, v = Math.floor(v / 256)) out[i] = v % 256;
  return out;
}

const KEM_SUITE_ID = concatBytes(utf8("KEM"), i2osp(KEM_X25519_HKDF_SHA256, 2));
const HPKE_SUITE_ID = concatBytes(utf8("HPKE"), i2osp(KEM_X25519_HKDF_SHA256, 2), i2osp(KDF_HKDF_SHA256, 2), i2osp(AEAD_AES_128_GCM, 2));
const EMPTY = new Uint8Array(0);

/** `LabeledExtract(salt, label, ikm)` (RFC 9180, Section 4). */
function labeledExtract(suiteId: Uint8Array, salt: Uint8Array, label: string, ikm: Uint8Array): Uint8Array {
  return extract(sha256, concatBytes(utf8("HPKE-v1"), suiteId, utf8(label), ikm), salt);
}

/** `LabeledExpand(prk, label, info, L)` (RFC 9180, Section 4). */
function labeledExpand(suiteId: Uint8Array, prk: Uint8Array, label: string, info: Uint8Array, length: number): Uint8Array {
  return expand(sha256, prk, concatBytes(i2osp(length, 2), utf8("HPKE-v1"), suiteId, utf8(label), info), length);
}

/** Refuse any suite but X25519/HKDF-SHA256/AES-128-GCM, naming the field that differs. */
export function checkSuite(kemId: number, kdfId: number, aeadId: number): void {
  const hex = (x: number): string => `0x${x.toString(16).padStart(4, "0")}`;
  for (const [name, got, want] of [
    ["kem_id", kemId, KEM_X25519_HKDF_SHA256],
    ["kdf_id", kdfId, KDF_HKDF_SHA256],
    ["aead_id", aeadId, AEAD_AES_128_GCM],
  ] as const) {
    if (got !== want) throw new HpkeError(`unsupported HPKE ${name} ${hex(got)}: only ${hex(want)} is supported`);
  }
}

function checkKey(name: string, key: unknown): asserts key is Uint8Array {
  if (!(key instanceof Uint8Array) || key.length !== X25519_KEY_SIZE) {
    const got = key instanceof Uint8Array ? `${key.length} bytes` : typeof key;
    throw new HpkeError(`${name} must be a Uint8Array of ${X25519_KEY_SIZE} bytes (an X25519 key); got ${got}`);
  }
}

export interface HpkeKeyPair {
  readonly publicKey: Uint8Array;
  readonly privateKey: Uint8Array;
}

/** `DeriveKeyPair(ikm)` of DHKEM(X25519, HKDF-SHA256) (RFC 9180, Section 7.1.3). */
export function deriveKeyPair(ikm: Uint8Array): HpkeKeyPair {
  const dkpPrk = labeledExtract(KEM_SUITE_ID, EMPTY, "dkp_prk", ikm);
  const privateKey = labeledExpand(KEM_SUITE_ID, dkpPrk, "sk", EMPTY, X25519_KEY_SIZE);
  return { publicKey: x25519.getPublicKey(privateKey), privateKey };
}

/**
 * `length` bytes of the platform CSPRNG, through the SDK's one source of it (which refuses to
 * run where `crypto.getRandomValues` is missing).
 */
export function randomBytes(length: number): Uint8Array {
  const words = new CryptoWordSource().words(Math.ceil(length / 8));
  return new Uint8Array(words.buffer, 0, length);
}

/** The platform's WebCrypto, or a clear error where it is missing. */
function subtle(): SubtleCrypto {
  const c = (globalThis as { crypto?: Crypto }).crypto;
  if (c?.subtle === undefined) {
    throw new HpkeError("crypto.subtle is missing: HPKE sealing needs WebCrypto (Node >= 20, or a browser page in a secure context)");
  }
  return c.subtle;
}

/**
 * `SealBase(pkR, info, aad, pt)` (RFC 9180, Sections 5.1 and 6.1): `[enc, ciphertext]` for the
 * holder of `publicKey`. `ephemeralIkm` fixes the ephemeral key (tests only); by default it is
 * drawn from `crypto.getRandomValues`.
 */
export async function sealBase(
  publicKey: Uint8Array,
  info: Uint8Array,
  aad: Uint8Array,
  plaintext: Uint8Array,
  ephemeralIkm?: Uint8Array,
): Promise<[Uint8Array, Uint8Array]> {
  checkKey("public_key", publicKey);
  const ikm = ephemeralIkm ?? randomBytes(X25519_KEY_SIZE);
  const ephemeral = deriveKeyPair(ikm);
  let dh: Uint8Array;
  try {
    dh = x25519.getSharedSecret(ephemeral.privateKey, publicKey);
  } catch (error) {
    throw new HpkeError(`cannot seal to public_key: not a usable X25519 public key (${(error as Error).name})`);
  }
  if (dh.every((b) => b === 0)) throw new HpkeError("cannot seal to public_key: a small-order X25519 point");
  const enc = ephemeral.publicKey;
  // Encap: ExtractAndExpand(dh, enc || pkR).
  const eaePrk = labeledExtract(KEM_SUITE_ID, EMPTY, "eae_prk", dh);
  const sharedSecret = labeledExpand(KEM_SUITE_ID, eaePrk, "shared_secret", concatBytes(enc, publicKey), 32);
  // KeySchedule in base mode (no PSK).
  const pskIdHash = labeledExtract(HPKE_SUITE_ID, EMPTY, "psk_id_hash", EMPTY);
  const infoHash = labeledExtract(HPKE_SUITE_ID, EMPTY, "info_hash", info);
  const context = concatBytes(Uint8Array.of(MODE_BASE), pskIdHash, infoHash);
  const secret = labeledExtract(HPKE_SUITE_ID, sharedSecret, "secret", EMPTY);
  const key = labeledExpand(HPKE_SUITE_ID, secret, "key", context, NK);
  const baseNonce = labeledExpand(HPKE_SUITE_ID, secret, "base_nonce", context, NN);
  // Sequence number 0: the nonce is the base nonce.
  // WebCrypto takes ArrayBuffer-backed views only: copies.
  const own = (b: Uint8Array): Uint8Array<ArrayBuffer> => new Uint8Array(b);
  const aesKey = await subtle().importKey("raw", own(key), { name: "AES-GCM" }, false, ["encrypt"]);
  const sealed = await subtle().encrypt({ name: "AES-GCM", iv: own(baseNonce), additionalData: own(aad), tagLength: 128 }, aesKey, own(plaintext));
  return [enc, new Uint8Array(sealed)];
}
