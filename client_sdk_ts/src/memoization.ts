/**
 * Memoization (docs/protocol.md, "Memoization: the device secret and its keyed source"; Python:
 * `client_sdk.secrets_store`, `client_sdk.client.memo_scope`): the device's keyed source and the
 * campaign's memo scope, which the client needs. What memoized mechanisms need (the chains, the
 * longitudinal wrapper) is in memo-chain.ts, so that the browser bundle's entry holds only this.
 * Permanent responses are never stored: they are recomputed from the keyed source per report.
 */
import { hmac } from "@noble/hashes/hmac";
import { sha256 } from "@noble/hashes/sha256";
import { configId, type JsonValue } from "./config.js";
import { WORD_SPAN } from "./rational.js";
import { bytesToHex } from "@noble/hashes/utils";
import { HmacWordSource, type WordSource } from "./words.js";

export const MEMO_VERSION = 1;
const MEMO_TAG = `ldp-telemetry/memo/v${MEMO_VERSION}`;
const LEDGER_TAG = `ldp-telemetry/ledger/v${MEMO_VERSION}`;
const MIN_SECRET_BYTES = 16;
const MAX_SCOPE_BYTES = 1024;

const utf8 = (text: string): Uint8Array => new TextEncoder().encode(text);

/** Deterministic randomness for memoized draws, keyed by a label and an index. */
export interface KeyedSource {
  /** What the draws belong to (the campaign's memo scope, 32 hex). */
  readonly scope: string;
  /** The raw device secret, for RAPPOR's reference derivation only. */
  readonly referenceSecret: Uint8Array;
  /** The word stream of one memoized draw (the same every time). */
  source(label: string, index: number | bigint): WordSource;
  /** The ledger's name of one memoized draw (a keyed hash: neither the value nor the response). */
  key(label: string, index: number | bigint): string;
}

function message(tag: string, scope: string, label: string, index: number | bigint): Uint8Array {
  const i = typeof index === "bigint" ? index : Number.isSafeInteger(index) ? BigInt(index) : -1n;
  if (i < 0n || i >= WORD_SPAN) throw new RangeError(`memo index must be an integer in [0, 2**64); got ${typeof index}`);
  const parts = [utf8(tag), utf8(scope), utf8(label)];
  const length = parts.reduce((sum, p) => sum + 4 + p.length, 8);
  const out = new Uint8Array(length);
  const view = new DataView(out.buffer);
  let at = 0;
  for (const part of parts) {
    view.setUint32(at, part.length, false);
    out.set(part, at + 4);
    at += 4 + part.length;
  }
  view.setBigUint64(at, i, false);
  return out;
}

/** The keyed source of one device secret and one campaign scope (Python: `DeviceKeys`). */
export class DeviceKeys implements KeyedSource {
  readonly #secret: Uint8Array;
  readonly scope: string;

  constructor(secret: Uint8Array, scope: string) {
    if (!(secret instanceof Uint8Array) || secret.length < MIN_SECRET_BYTES) {
      throw new TypeError(`device secret must be a Uint8Array of at least ${MIN_SECRET_BYTES} bytes; got ${typeof secret}`);
    }
    if (typeof scope !== "string" || scope.length === 0 || utf8(scope).length > MAX_SCOPE_BYTES) {
      throw new TypeError(`scope must be a non-empty string of at most ${MAX_SCOPE_BYTES} bytes; got ${typeof scope}`);
    }
    this.#secret = Uint8Array.from(secret);
    this.scope = scope;
  }

  get referenceSecret(): Uint8Array {
    return Uint8Array.from(this.#secret);
  }

  source(label: string, index: number | bigint): WordSource {
    return new HmacWordSource(hmac(sha256, this.#secret, message(MEMO_TAG, this.scope, label, index)));
  }

  key(label: string, index: number | bigint): string {
    return bytesToHex(hmac(sha256, this.#secret, message(LEDGER_TAG, this.scope, label, index)));
  }

  toString(): string {
    return `DeviceKeys(scope=${this.scope})`;
  }
}

/**
 * A campaign's memo scope: `config_id({"campaign": name, "mechanism": canonical config})`
 * (Python: `client_sdk.client.memo_scope`). `mechanism` is the config as `parseJson` reads the
 * served text, so that floats stay floats (`1.0` and `1` give different scopes, as in Python).
 */
export function memoScope(campaign: string, mechanism: JsonValue): string {
  if (typeof campaign !== "string") throw new TypeError(`campaign must be a string; got ${typeof campaign}`);
  return configId({ campaign, mechanism });
}
