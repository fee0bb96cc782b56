/**
 * The conformance vectors of this group's mechanisms (../conformance/vectors), with each case's
 * keyed source (docs/protocol.md, "Memoization") for the per-device draws.
 */
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { hmac } from "@noble/hashes/hmac";
import { sha256 } from "@noble/hashes/sha256";
import { bytesToHex, hexToBytes } from "@noble/hashes/utils";
import { HmacWordSource } from "../src/words.js";
import type { KeyedSource } from "../src/mechanisms/bounded.js";
import type { MechanismConfig } from "../src/mechanisms/types.js";

/** The first folder above this file (in test/ or dist/test/) holding `relative`. */
function findAbove(relative: string): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 5; i++) {
    const candidate = join(dir, relative);
    try {
      readFileSync(candidate);
      return candidate;
    } catch {
      dir = dirname(dir);
    }
  }
  throw new Error(`${relative} not found above the test file`);
}

export interface VectorCase {
  readonly config: MechanismConfig;
  readonly value: unknown;
  readonly words_key: string;
  readonly payload: unknown;
  readonly campaign?: string;
  readonly device_secret?: string;
  /** The canonical JSON of the case's config, floats as Python writes them. */
  readonly configJson: string;
}

/** A float kept as the text Python wrote (canonical JSON keeps "1.0" apart from "1"). */
class PyFloat {
  constructor(readonly text: string) {}
}

/** JSON with floats kept as their text: enough to rebuild Python's canonical JSON. */
function parseKeepingFloats(text: string): unknown {
  let i = 0;
  const ws = (): void => {
    while (/\s/.test(text[i] ?? "")) i++;
  };
  const value = (): unknown => {
    ws();
    const c = text[i];
    if (c === "{") {
      i++;
      const out: Record<string, unknown> = {};
      ws();
      if (text[i] === "}") {
        i++;
        return out;
      }
      for (;;) {
        ws();
        const key = value() as string;
        ws();
        i++; // :
        out[key] = value();
        ws();
        if (text[i++] === "}") return out;
      }
    }
    if (c === "[") {
      i++;
      const out: unknown[] = [];
      ws();
      if (text[i] === "]") {
        i++;
        return out;
      }
      for (;;) {
        out.push(value());
        ws();
        if (text[i++] === "]") return out;
      }
    }
    if (c === '"') {
      const start = i;
      i++;
      while (text[i] !== '"') i += text[i] === "\\" ? 2 : 1;
      i++;
      return JSON.parse(text.slice(start, i)) as string;
    }
    const match = /^(-?\d+(\.\d+)?([eE][-+]?\d+)?|true|false|null)/.exec(text.slice(i));
    if (match === null) throw new Error(`bad JSON at ${i}`);
    i += match[0].length;
    const token = match[0];
    if (/[.eE]/.test(token)) return new PyFloat(token);
    return JSON.parse(token) as unknown;
  };
  return value();
}

/** Canonical JSON (client_sdk.config.canonical_json): sorted keys, no spaces, floats as parsed. */
function canonical(value: unknown): string {
  if (value instanceof PyFloat) return value.text;
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(",")}}`;
  }
  return JSON.stringify(value);
}

/** The cases of a JSON file `{"cases": [...]}`, each with its config's canonical JSON. */
function loadJsonCases<Case>(relative: string): (Case & { configJson: string })[] {
  const text = readFileSync(findAbove(relative), "utf8");
  const plain = JSON.parse(text) as { cases: Case[] };
  const kept = parseKeepingFloats(text) as { cases: { config: unknown }[] };
  return plain.cases.map((c, index) => ({ ...c, configJson: canonical(kept.cases[index]?.config) }));
}

/** The cases of conformance/vectors/<mechanism>.json. */
export function loadCases(mechanism: string): VectorCase[] {
  return loadJsonCases<Omit<VectorCase, "configJson">>(join("conformance", "vectors", `${mechanism}.json`));
}

/** A batch of several values from one word source, with the Python SDK's payloads. */
export interface BatchCase extends Omit<VectorCase, "value" | "payload"> {
  readonly values: unknown[];
  readonly payloads: unknown[];
}

/** test/fixtures/numeric_batches.json (written by numeric_batches.py beside it). */
export function loadBatches(): BatchCase[] {
  return loadJsonCases<Omit<BatchCase, "configJson">>(join("test", "fixtures", "numeric_batches.json"));
}

/** The case's report words. */
export function caseWords(c: Pick<VectorCase, "words_key">): HmacWordSource {
  return new HmacWordSource(hexToBytes(c.words_key));
}

function len32(bytes: Uint8Array): Uint8Array {
  const out = new Uint8Array(4 + bytes.length);
  new DataView(out.buffer).setUint32(0, bytes.length, false);
  out.set(bytes, 4);
  return out;
}

/** The case's keyed source: HMAC words under the device secret and the campaign's scope. */
export function caseKeys(c: Pick<VectorCase, "device_secret" | "campaign" | "configJson">): KeyedSource | undefined {
  if (c.device_secret === undefined || c.campaign === undefined) return undefined;
  const utf8 = new TextEncoder();
  const content = `{"campaign":${JSON.stringify(c.campaign)},"mechanism":${c.configJson}}`;
  const scope = bytesToHex(sha256(utf8.encode(content))).slice(0, 32);
  const secret = hexToBytes(c.device_secret);
  return {
    source(label: string, index: number): HmacWordSource {
      const parts = [utf8.encode("ldp-telemetry/memo/v1"), utf8.encode(scope), utf8.encode(label)].map(len32);
      const indexBytes = new Uint8Array(8);
      new DataView(indexBytes.buffer).setBigUint64(0, BigInt(index), false);
      const message = new Uint8Array([...parts.flatMap((p) => [...p]), ...indexBytes]);
      return new HmacWordSource(hmac(sha256, secret, message));
    },
  };
}
