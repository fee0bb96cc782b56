/**
 * X25519 (RFC 7748) from @noble/curves' Montgomery ladder alone: importing its `ed25519` module
 * would pull Edwards arithmetic and SHA-512 into the browser bundle for nothing (the DAP chunk's
 * HPKE uses this one; sealing.ts builds the same for shuffled campaigns).
 */
import { montgomery } from "@noble/curves/abstract/montgomery";
import { pow } from "@noble/curves/abstract/modular";

const P = 2n ** 255n - 19n;

export const x25519 = montgomery({
  P,
  type: "x25519",
  powPminus2: (x) => pow(x, P - 2n, P),
  adjustScalarBytes: (bytes) => {
    bytes[0] = (bytes[0] as number) & 248;
    bytes[31] = ((bytes[31] as number) & 127) | 64;
    return bytes;
  },
  randomBytes: (length = 32) => globalThis.crypto.getRandomValues(new Uint8Array(length)),
});
