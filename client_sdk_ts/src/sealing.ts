/**
 * Sealed reports for shuffled campaigns (docs/protocol.md, "The sealed envelope"; Python:
 * `client_sdk.sealing`). Each payload is sealed on its own to the collector's X25519 key with
 * libsodium's sealed-box construction, so the shuffler sees only ciphertext (Bittau et al.,
 * "Prochlo", SOSP 2017):
 *
 *     sealed = epk || XSalsa20-Poly1305(key = HSalsa20(X25519(esk, pk), 0), nonce = BLAKE2b-192(epk || pk), plaintext)
 *
 * The plaintext `{"campaign","config_id","nonce","payload"}` is padded with spaces to the
 * campaign's fixed size, so every envelope of a campaign has the same length.
 */
import { hsalsa, xsalsa20poly1305 } from "@noble/ciphers/salsa";
import { blake2b } from "@noble/hashes/blake2b";
import { sha256 } from "@noble/hashes/sha256";
import { bytesToHex } from "@noble/hashes/utils";
import { header, type SealingKey } from "./sealing-size.js";
import type { WordSource } from "./words.js";
import { x25519 } from "./x25519.js";

export { plaintextSize, type SealingKey } from "./sealing-size.js";

/** "expand 32-byte k", the Salsa20 constants, as little-endian words. */
const SIGMA = new Uint32Array([0x61707865, 0x3320646e, 0x79622d32, 0x6b206574]);

/** An envelope as the upload carries it. */
export interface Envelope {
  readonly key_id: string;
  readonly sealed: string;
}

/** Unpadded URL-safe base64. */
export function base64url(bytes: Uint8Array): string {
  let binary = "";
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function fromBase64url(text: string): Uint8Array {
  const binary = atob(text.replace(/-/g, "+").replace(/_/g, "/") + "=".repeat((4 - (text.length % 4)) % 4));
  return Uint8Array.from(binary, (c) => c.charCodeAt(0));
}

/** The key id of a 32-byte X25519 public key: the first 8 bytes of its SHA-256, in hex. */
export function keyIdOf(publicKey: Uint8Array): string {
  return bytesToHex(sha256(publicKey)).slice(0, 16);
}

/** libsodium's `crypto_box_seal` with a given ephemeral secret key (tests fix it; devices draw it). */
export function sealBox(plaintext: Uint8Array, publicKey: Uint8Array, ephemeralSecret: Uint8Array): Uint8Array {
  const epk = x25519.getPublicKey(ephemeralSecret);
  const shared = x25519.getSharedSecret(ephemeralSecret, publicKey);
  const key = new Uint32Array(8);
  hsalsa(SIGMA, new Uint32Array(shared.slice().buffer), new Uint32Array(4), key); // crypto_box_beforenm
  const nonce = blake2b(new Uint8Array([...epk, ...publicKey]), { dkLen: 24 });
  const box = xsalsa20poly1305(new Uint8Array(key.buffer), nonce).encrypt(plaintext);
  const out = new Uint8Array(32 + box.length);
  out.set(epk);
  out.set(box, 32);
  return out;
}

/** A nonce of 128 bits: two words, each as 16 hex digits big-endian. */
export function nonceOf(words: WordSource): string {
  return Array.from(words.words(2), (word) => word.toString(16).padStart(16, "0")).join("");
}

/**
 * The envelope of one payload. `nonces` gives the plaintext's nonce and `ephemeral` the box's
 * ephemeral secret (both the platform CSPRNG on a device). Throws when the key does not match
 * its id or the payload is longer than the campaign's bound (its length would single it out).
 */
export function sealPayload(payload: unknown, key: SealingKey, nonces: WordSource, ephemeral?: Uint8Array): Envelope {
  const raw = fromBase64url(key.publicKey);
  if (raw.length !== 32 || keyIdOf(raw) !== key.keyId) {
    throw new Error(`public_key does not match key_id (a ${typeof key.keyId}); the campaign document was altered`);
  }
  const text = header(key.campaign, key.configId, nonceOf(nonces)) + JSON.stringify(payload) + "}";
  const data = new TextEncoder().encode(text);
  if (data.length > key.size) {
    throw new Error(`a payload of ${data.length - key.size} bytes more than the campaign's largest cannot be sealed (its size would single it out)`);
  }
  const padded = new Uint8Array(key.size).fill(0x20);
  padded.set(data);
  const secret = ephemeral ?? x25519.utils.randomPrivateKey();
  return { key_id: key.keyId, sealed: base64url(sealBox(padded, raw, secret)) };
}
