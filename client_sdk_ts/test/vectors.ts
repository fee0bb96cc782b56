/** The conformance vectors of a mechanism, and the sources one case's report draws from. */
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { sha256 } from "@noble/hashes/sha256";
import { DeviceKeys } from "../src/mechanisms/pending-core.js";
import { fromHex } from "../src/wire.js";
import { HmacWordSource } from "../src/words.js";

export interface VectorCase {
  config: { mechanism: string } & Record<string, unknown>;
  value: unknown;
  words_key: string;
  payload: unknown;
  campaign?: string;
  device_secret?: string;
}

/** From dist/test/ (or test/) up to the repository's conformance/vectors/. */
function vectorsDir(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 5; i++) {
    const candidate = join(dir, "conformance", "vectors");
    try {
      readFileSync(join(candidate, "grr.json"));
      return candidate;
    } catch {
      dir = dirname(dir);
    }
  }
  throw new Error("conformance/vectors/ not found above the test file");
}

export function loadCases(mechanism: string): VectorCase[] {
  const text = readFileSync(join(vectorsDir(), `${mechanism}.json`), "utf8");
  return (JSON.parse(text) as { cases: VectorCase[] }).cases;
}


/** The config fields Python writes as floats (JSON.parse cannot tell 4.0 from 4). */
const FLOAT_FIELDS = new Set(["epsilon", "epsilon_permanent", "fragment_share"]);

/** Python's repr of a float (shortest round trip; exponent below 1e-4 or from 1e16). */
export function pyFloat(x: number): string {
  if (Number.isInteger(x) && Math.abs(x) < 1e16) return `${x}.0`;
  const abs = Math.abs(x);
  if (abs >= 1e-4 && abs < 1e16) return String(x);
  const [mantissa, exponent] = x.toExponential().split("e") as [string, string];
  const e = Number(exponent);
  return `${mantissa}e${e < 0 ? "-" : "+"}${String(Math.abs(e)).padStart(2, "0")}`;
}

/** Canonical JSON (sorted keys, compact, floats as Python writes them). */
export function canonical(value: unknown, key?: string): string {
  if (typeof value === "number") return key !== undefined && FLOAT_FIELDS.has(key) ? pyFloat(value) : String(value);
  if (Array.isArray(value)) return `[${value.map((v) => canonical(v)).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v, k)}`).join(",")}}`;
  }
  return JSON.stringify(value);
}

/** The case's word source and (memoized cases) the device's keyed source under its scope. */
export function sources(c: VectorCase): { rng: HmacWordSource; keys?: DeviceKeys } {
  const rng = new HmacWordSource(fromHex(c.words_key));
  if (c.device_secret === undefined || c.campaign === undefined) return { rng };
  const content = canonical({ campaign: c.campaign, mechanism: c.config });
  const digest = sha256(new TextEncoder().encode(content));
  const scope = Array.from(digest, (b) => b.toString(16).padStart(2, "0")).join("").slice(0, 32);
  return { rng, keys: new DeviceKeys(fromHex(c.device_secret), scope) };
}
