/**
 * Canonical JSON, `config_id` and the campaign document (docs/protocol.md, "The campaign
 * document, canonical JSON and `config_id`"; Python: `client_sdk.config`, `client_sdk.protocol`,
 * `client_sdk.campaign`).
 *
 * Python writes a float with a fraction or an exponent (`1.0`, `1e-06`) and an integer without,
 * and `config_id` hashes that text. `JSON.parse` forgets the difference, so documents are read
 * here with {@link parseJson}, which keeps every float as a {@link JsonFloat}; {@link canonicalJson}
 * writes it back with Python's `repr` rules.
 */
import { sha256 } from "@noble/hashes/sha256";
import { bytesToHex } from "@noble/hashes/utils";

/** The device protocol this SDK implements (Python: `client_sdk.campaign.PROTOCOL_VERSION`). */
export const PROTOCOL_VERSION = 1;
/** The largest campaign document a device reads (1 MiB; Python: `policy.MAX_DOCUMENT_BYTES`). */
export const MAX_DOCUMENT_BYTES = 1 << 20;
/** Fewest reports an estimate may use, unless the campaign says (`protocol.DEFAULT_MIN_BATCH_SIZE`). */
export const DEFAULT_MIN_BATCH_SIZE = 100;
/** Campaign names are URL path segments (Python: `campaign.CAMPAIGN_NAME_PATTERN`). */
export const CAMPAIGN_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
/** The largest integer every JSON reader holds exactly. */
const MAX_SAFE_INT = Number.MAX_SAFE_INTEGER;

/** A number the document wrote as a float (`1.0`), kept apart from the integer `1`. */
export class JsonFloat {
  constructor(readonly value: number) {
    if (!Number.isFinite(value)) throw new RangeError("a JSON float must be finite");
  }
  valueOf(): number {
    return this.value;
  }
  toJSON(): number {
    return this.value;
  }
}

/** A JSON value as {@link parseJson} reads it: floats as {@link JsonFloat}. */
export type JsonValue = null | boolean | number | string | JsonFloat | JsonValue[] | { [key: string]: JsonValue };

/** What a value is, without what it says (errors never echo a value). */
export function describe(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  if (value instanceof JsonFloat) return "a number";
  if (typeof value === "string") return `a string of ${value.length} characters`;
  return `a ${typeof value}`;
}

/** Parse JSON text, keeping floats as {@link JsonFloat} (integers stay numbers). */
export function parseJson(text: string): JsonValue {
  let at = 0;
  const fail = (what: string): never => {
    throw new SyntaxError(`not JSON: ${what} at character ${at}`);
  };
  const space = (): void => {
    while (at < text.length && " \t\n\r".includes(text[at] as string)) at++;
  };
  const value = (depth: number): JsonValue => {
    if (depth > 64) fail("nesting deeper than 64");
    space();
    const c = text[at];
    if (c === "{") {
      at++;
      const out: { [key: string]: JsonValue } = {};
      space();
      if (text[at] === "}") {
        at++;
        return out;
      }
      for (;;) {
        space();
        if (text[at] !== '"') fail("expected a key");
        const key = string();
        space();
        if (text[at] !== ":") fail("expected ':'");
        at++;
        Object.defineProperty(out, key, { value: value(depth + 1), enumerable: true, writable: true, configurable: true });
        space();
        if (text[at] === ",") {
          at++;
          continue;
        }
        if (text[at] === "}") {
          at++;
          return out;
        }
        fail("expected ',' or '}'");
      }
    }
    if (c === "[") {
      at++;
      const out: JsonValue[] = [];
      space();
      if (text[at] === "]") {
        at++;
        return out;
      }
      for (;;) {
        out.push(value(depth + 1));
        space();
        if (text[at] === ",") {
          at++;
          continue;
        }
        if (text[at] === "]") {
          at++;
          return out;
        }
        fail("expected ',' or ']'");
      }
    }
    if (c === '"') return string();
    for (const [word, result] of [["true", true], ["false", false], ["null", null]] as const) {
      if (text.startsWith(word, at)) {
        at += word.length;
        return result;
      }
    }
    const match = /^-?(?:0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/.exec(text.slice(at, at + 400));
    if (match === null) return fail("unexpected character");
    at += match[0].length;
    const number = Number(match[0]);
    if (!Number.isFinite(number)) fail("a number out of range");
    if (match[1] !== undefined || match[2] !== undefined) return new JsonFloat(number);
    if (!Number.isSafeInteger(number)) fail("an integer beyond 2^53");
    return number;
  };
  const string = (): string => {
    const end = /^"(?:[^"\\\u0000-\u001f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"/.exec(text.slice(at));
    if (end === null) return fail("a bad string");
    at += end[0].length;
    return JSON.parse(end[0]) as string;
  };
  const result = value(0);
  space();
  if (at !== text.length) fail("trailing characters");
  return result;
}

/** Python's `repr` of a finite float: shortest round-trip digits, exponent outside [1e-4, 1e16). */
export function pythonFloatRepr(x: number): string {
  if (!Number.isFinite(x)) throw new RangeError("NaN and infinity are not JSON");
  if (x === 0) return Object.is(x, -0) ? "-0.0" : "0.0";
  const [mantissa, exponent] = x.toExponential().split("e") as [string, string];
  const negative = mantissa.startsWith("-");
  const digits = mantissa.replace("-", "").replace(".", "");
  const decpt = Number(exponent) + 1; // x = 0.d1d2... * 10^decpt
  let body: string;
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) body = `0.${"0".repeat(-decpt)}${digits}`;
    else if (decpt >= digits.length) body = `${digits}${"0".repeat(decpt - digits.length)}.0`;
    else body = `${digits.slice(0, decpt)}.${digits.slice(decpt)}`;
  } else {
    const e = decpt - 1;
    const tail = digits.length > 1 ? `${digits[0]}.${digits.slice(1)}` : digits;
    body = `${tail}e${e < 0 ? "-" : "+"}${String(Math.abs(e)).padStart(2, "0")}`;
  }
  return negative ? `-${body}` : body;
}

/** Compare strings by code point, as Python sorts `str` keys. */
function byCodePoint(a: string, b: string): number {
  const x = Array.from(a);
  const y = Array.from(b);
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    const d = (x[i] as string).codePointAt(0)! - (y[i] as string).codePointAt(0)!;
    if (d !== 0) return d;
  }
  return x.length - y.length;
}

/**
 * Python's `canonical_json`: sorted keys, `,` and `:` without spaces, UTF-8 characters as
 * themselves, floats by `repr`. A plain JS number that is an integer is written as an integer
 * (a document built in JS cannot say `1.0`: pass its JSON text instead).
 */
export function canonicalJson(value: unknown): string {
  if (value === null) return "null";
  if (value instanceof JsonFloat) return pythonFloatRepr(value.value);
  switch (typeof value) {
    case "boolean":
      return value ? "true" : "false";
    case "string":
      return JSON.stringify(value);
    case "number":
      if (!Number.isFinite(value)) throw new RangeError("NaN and infinity are not JSON");
      return Number.isInteger(value) && Math.abs(value) <= MAX_SAFE_INT ? String(value) : pythonFloatRepr(value);
    case "object": {
      if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
      const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined);
      entries.sort(([a], [b]) => byCodePoint(a, b));
      return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(",")}}`;
    }
    default:
      throw new TypeError(`${typeof value} is not JSON`);
  }
}

/** 32 hex characters of SHA-256 over {@link canonicalJson} (Python: `config.config_id`). */
export function configId(value: unknown): string {
  return bytesToHex(sha256(new TextEncoder().encode(canonicalJson(value)))).slice(0, 32);
}

/** A document's values as plain JS (each {@link JsonFloat} as its number): what mechanisms read. */
export function toPlain(value: unknown): unknown {
  if (value instanceof JsonFloat) return value.value;
  if (Array.isArray(value)) return value.map(toPlain);
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, toPlain(v)]));
  }
  return value;
}

/** A campaign's budget (Python: `campaign.BudgetPolicy`). */
export interface BudgetPolicy {
  readonly epsilon_per_report: number;
  readonly reports_per_period: number;
  readonly period_seconds: number;
}

/** Validate a budget object; the error names the field and the value's type. */
export function budgetPolicy(policy: unknown, field = "policy"): BudgetPolicy {
  if (policy === null || typeof policy !== "object" || Array.isArray(policy)) {
    throw new TypeError(`${field} must be a JSON object; got ${describe(policy)}`);
  }
  const fields = ["epsilon_per_report", "reports_per_period", "period_seconds"];
  const record = toPlain(policy) as Record<string, unknown>;
  const missing = fields.filter((f) => !Object.hasOwn(record, f));
  if (missing.length) throw new TypeError(`${field} is missing ${missing.join(", ")}`);
  const unknown = Object.keys(record).filter((f) => !fields.includes(f)).sort();
  if (unknown.length) throw new TypeError(`${field} has unknown field(s) ${unknown.join(", ")}`);
  const epsilon = record.epsilon_per_report;
  if (typeof epsilon !== "number" || !(epsilon > 0) || !Number.isFinite(epsilon)) {
    throw new RangeError(`${field}.epsilon_per_report must be a positive finite number; got ${describe(epsilon)}`);
  }
  for (const f of ["reports_per_period", "period_seconds"] as const) {
    const v = record[f];
    if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 1) {
      throw new RangeError(`${field}.${f} must be an integer of at least 1; got ${describe(v)}`);
    }
  }
  return {
    epsilon_per_report: epsilon,
    reports_per_period: record.reports_per_period as number,
    period_seconds: record.period_seconds as number,
  };
}

/** A campaign document as a device reads it, verified against its `config_id`. */
export interface CampaignDocument {
  readonly name: string;
  /** The canonical mechanism config as plain JS (what `mechanismFromConfig` takes). */
  readonly mechanism: { readonly mechanism: string } & Readonly<Record<string, unknown>>;
  /** The same config as read from the text, its floats kept (what the memo scope hashes). */
  readonly mechanismJson: JsonValue;
  readonly domain: readonly string[] | null;
  readonly policy: BudgetPolicy | null;
  readonly minBatchSize: number;
  readonly shuffle: Readonly<Record<string, unknown>> | null;
  /** A shuffled campaign's collector key `{key_id, key}` (base64url), which its reports are sealed to. */
  readonly publicKey: { readonly key_id: string; readonly key: string } | null;
  readonly configId: string;
  /** The document as JSON text (what the device caches). */
  readonly text: string;
}

/** The campaign's hashed content (Python: `protocol.campaign_content`). */
function campaignContent(document: Record<string, JsonValue | undefined>, minBatchSize: number): Record<string, unknown> {
  const content: Record<string, unknown> = {
    mechanism: document.mechanism,
    domain: document.domain ?? null,
    policy: document.policy ?? null,
    min_batch_size: minBatchSize,
  };
  if (document.shuffle !== undefined && document.shuffle !== null) content.shuffle = document.shuffle;
  return content;
}

/**
 * Read and verify a campaign document (its JSON text, or a parsed object): the protocol
 * version, the name, the fields' types, and the `config_id` recomputed from the content.
 * Throws naming the field; never echoes a value.
 */
export function parseCampaignDocument(input: string | object, expectedName?: string): CampaignDocument {
  let parsed: JsonValue;
  if (typeof input === "string") {
    if (new TextEncoder().encode(input).length > MAX_DOCUMENT_BYTES) {
      throw new RangeError(`the campaign document is larger than ${MAX_DOCUMENT_BYTES} bytes; refused unread`);
    }
    parsed = parseJson(input);
  } else {
    parsed = input as JsonValue;
  }
  if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed) || parsed instanceof JsonFloat) {
    throw new TypeError(`a campaign document must be a JSON object; got ${describe(parsed)}`);
  }
  const document = parsed as Record<string, JsonValue | undefined>;
  const protocol = document.protocol ?? PROTOCOL_VERSION;
  if (protocol !== PROTOCOL_VERSION) {
    throw new RangeError(
      `protocol must be ${PROTOCOL_VERSION} (the device protocol this SDK implements, docs/protocol.md); got ${describe(protocol)}`,
    );
  }
  const name = document.name;
  if (typeof name !== "string" || !CAMPAIGN_NAME_PATTERN.test(name)) {
    throw new TypeError(
      `name must be 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit; got ${describe(name)}`,
    );
  }
  if (expectedName !== undefined && name !== expectedName) {
    throw new Error(`asked for campaign ${JSON.stringify(expectedName)}, got a document named ${JSON.stringify(name)}`);
  }
  const mechanism = document.mechanism;
  if (mechanism === null || typeof mechanism !== "object" || Array.isArray(mechanism) || mechanism instanceof JsonFloat) {
    throw new TypeError(`campaign ${name}: mechanism must be a JSON object; got ${describe(mechanism)}`);
  }
  if (typeof mechanism.mechanism !== "string") {
    throw new TypeError(`campaign ${name}: mechanism.mechanism must be a string; got ${describe(mechanism.mechanism)}`);
  }
  const domain = document.domain ?? null;
  if (domain !== null && (!Array.isArray(domain) || !domain.every((label) => typeof label === "string"))) {
    throw new TypeError(`campaign ${name}: domain must be an array of strings or null; got ${describe(domain)}`);
  }
  if (domain !== null && new Set(domain).size !== domain.length) {
    throw new RangeError(`campaign ${name}: domain has repeated labels`);
  }
  const policy = document.policy ?? null;
  const budget = policy === null ? null : budgetPolicy(policy, `campaign ${name}: policy`);
  const minBatchSize = document.min_batch_size ?? DEFAULT_MIN_BATCH_SIZE;
  if (typeof minBatchSize !== "number" || !Number.isSafeInteger(minBatchSize) || minBatchSize < 1) {
    throw new RangeError(`campaign ${name}: min_batch_size must be an integer of at least 1; got ${describe(minBatchSize)}`);
  }
  const shuffle = document.shuffle ?? null;
  if (shuffle !== null && (typeof shuffle !== "object" || Array.isArray(shuffle) || shuffle instanceof JsonFloat)) {
    throw new TypeError(`campaign ${name}: shuffle must be a JSON object or null; got ${describe(shuffle)}`);
  }
  const key = document.public_key ?? null;
  if (
    key !== null &&
    (typeof key !== "object" || Array.isArray(key) || key instanceof JsonFloat || typeof key.key_id !== "string" || typeof key.key !== "string")
  ) {
    throw new TypeError(`campaign ${name}: public_key must be an object {key_id, key} of strings; got ${describe(key)}`);
  }
  const expected = configId(campaignContent(document, minBatchSize));
  if (document.config_id !== expected) {
    const hint = typeof input === "string" ? "" : " (a document parsed by JSON.parse loses 1.0 versus 1: pass its JSON text)";
    throw new Error(`campaign ${name}: config_id does not match its content (expected ${expected})${hint}`);
  }
  return {
    name,
    mechanism: toPlain(mechanism) as CampaignDocument["mechanism"],
    mechanismJson: mechanism,
    domain: domain as string[] | null,
    policy: budget,
    minBatchSize,
    shuffle: shuffle === null ? null : (toPlain(shuffle) as Record<string, unknown>),
    publicKey: key === null ? null : { key_id: key.key_id as string, key: key.key as string },
    configId: expected,
    text: typeof input === "string" ? input : canonicalJson(input),
  };
}
