/**
 * Canonical JSON as Python writes it (docs/protocol.md, "The campaign document, canonical JSON
 * and `config_id`"; Python: `client_sdk.config.canonical_json`): keys sorted by code point, no
 * spaces, non-ASCII as itself, and numbers as Python writes them: a float always carries a
 * fraction or an exponent (`1.0`, `1e-06`), an integer never does. `JSON.parse` forgets that
 * distinction, so canonical JSON is made from the JSON *text* (the served document), which this
 * module parses into a tree that keeps each number's kind.
 */
import { sha256 } from "@noble/hashes/sha256";
import { toHex } from "./wire.js";

/** A JSON value with each number's kind kept (`int` or `float`, as Python would parse it). */
export type JsonTree =
  | { kind: "null" }
  | { kind: "bool"; value: boolean }
  | { kind: "int"; value: bigint }
  | { kind: "float"; value: number }
  | { kind: "string"; value: string }
  | { kind: "array"; items: JsonTree[] }
  | { kind: "object"; entries: [string, JsonTree][] };

/** Parses JSON text into a {@link JsonTree}; a number with `.`, `e` or `E` is a float. */
export function parseJsonTree(text: string): JsonTree {
  let at = 0;
  const fail = (what: string): never => {
    throw new SyntaxError(`JSON: ${what} at offset ${at}`);
  };
  const space = (): void => {
    while (at < text.length && " \t\n\r".includes(text[at]!)) at++;
  };
  const value = (): JsonTree => {
    space();
    const c = text[at];
    if (c === "{") {
      at++;
      const entries: [string, JsonTree][] = [];
      space();
      if (text[at] === "}") {
        at++;
        return { kind: "object", entries };
      }
      for (;;) {
        space();
        if (text[at] !== '"') fail("expected a key");
        const key = string();
        space();
        if (text[at] !== ":") fail("expected ':'");
        at++;
        entries.push([key, value()]);
        space();
        if (text[at] === ",") at++;
        else if (text[at] === "}") {
          at++;
          return { kind: "object", entries };
        } else fail("expected ',' or '}'");
      }
    }
    if (c === "[") {
      at++;
      const items: JsonTree[] = [];
      space();
      if (text[at] === "]") {
        at++;
        return { kind: "array", items };
      }
      for (;;) {
        items.push(value());
        space();
        if (text[at] === ",") at++;
        else if (text[at] === "]") {
          at++;
          return { kind: "array", items };
        } else fail("expected ',' or ']'");
      }
    }
    if (c === '"') return { kind: "string", value: string() };
    if (text.startsWith("true", at)) {
      at += 4;
      return { kind: "bool", value: true };
    }
    if (text.startsWith("false", at)) {
      at += 5;
      return { kind: "bool", value: false };
    }
    if (text.startsWith("null", at)) {
      at += 4;
      return { kind: "null" };
    }
    const match = /^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/.exec(text.slice(at, at + 400));
    if (match === null) return fail("unexpected character");
    at += match[0].length;
    if (match[2] === undefined && match[3] === undefined) return { kind: "int", value: BigInt(match[0]) };
    return { kind: "float", value: Number(match[0]) };
  };
  const string = (): string => {
    const end = scanString(text, at);
    const out = JSON.parse(text.slice(at, end)) as string;
    at = end;
    return out;
  };
  const tree = value();
  space();
  if (at !== text.length) fail("trailing text");
  return tree;
}

function scanString(text: string, start: number): number {
  let at = start + 1;
  while (at < text.length) {
    const c = text[at];
    if (c === "\\") at += 2;
    else if (c === '"') return at + 1;
    else at++;
  }
  throw new SyntaxError(`JSON: unterminated string at offset ${start}`);
}

/** The plain JavaScript value of a tree (what `JSON.parse` gives; big integers as numbers). */
export function treeValue(tree: JsonTree): unknown {
  switch (tree.kind) {
    case "null":
      return null;
    case "bool":
    case "string":
    case "float":
      return tree.value;
    case "int":
      return Number(tree.value);
    case "array":
      return tree.items.map(treeValue);
    case "object":
      return Object.fromEntries(tree.entries.map(([k, v]) => [k, treeValue(v)]));
  }
}

/** The member `key` of an object tree. */
export function treeMember(tree: JsonTree, key: string): JsonTree | undefined {
  if (tree.kind !== "object") return undefined;
  for (const [k, v] of tree.entries) if (k === key) return v;
  return undefined;
}

/** Python's `repr(float)`: shortest round-trip digits, exponent form below 1e-4 or from 1e16. */
export function pythonFloatRepr(value: number): string {
  if (!Number.isFinite(value)) throw new RangeError(`canonical JSON has no NaN or infinity (got ${typeof value})`);
  if (value === 0) return Object.is(value, -0) ? "-0.0" : "0.0";
  const [mantissa, exponentText] = value.toExponential().split("e") as [string, string];
  const exponent = Number(exponentText);
  const negative = mantissa.startsWith("-");
  const digits = mantissa.replace("-", "").replace(".", "");
  const sign = negative ? "-" : "";
  if (exponent < -4 || exponent >= 16) {
    const body = digits.length > 1 ? `${digits[0]}.${digits.slice(1)}` : digits;
    const e = Math.abs(exponent).toString().padStart(2, "0");
    return `${sign}${body}e${exponent < 0 ? "-" : "+"}${e}`;
  }
  if (exponent < 0) return `${sign}0.${"0".repeat(-exponent - 1)}${digits}`;
  const whole = digits.slice(0, exponent + 1).padEnd(exponent + 1, "0");
  const fraction = digits.slice(exponent + 1);
  return `${sign}${whole}.${fraction === "" ? "0" : fraction}`;
}

function compareCodePoints(a: string, b: string): number {
  const x = [...a];
  const y = [...b];
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    const d = x[i]!.codePointAt(0)! - y[i]!.codePointAt(0)!;
    if (d !== 0) return d;
  }
  return x.length - y.length;
}

/** A JSON string as Python's `json.dumps(..., ensure_ascii=False)` writes it. */
export function pythonJsonString(value: string): string {
  return JSON.stringify(value);
}

/** Canonical JSON text of a tree (sorted keys, compact, Python's numbers). */
export function canonicalJson(tree: JsonTree): string {
  switch (tree.kind) {
    case "null":
      return "null";
    case "bool":
      return tree.value ? "true" : "false";
    case "int":
      return tree.value.toString();
    case "float":
      return pythonFloatRepr(tree.value);
    case "string":
      return pythonJsonString(tree.value);
    case "array":
      return `[${tree.items.map(canonicalJson).join(",")}]`;
    case "object": {
      const entries = [...tree.entries].sort(([a], [b]) => compareCodePoints(a, b));
      return `{${entries.map(([k, v]) => `${pythonJsonString(k)}:${canonicalJson(v)}`).join(",")}}`;
    }
  }
}

/** The first 32 hex characters of SHA-256 over a canonical JSON text (Python: `config_id`). */
export function configIdOfCanonical(canonical: string): string {
  return toHex(sha256(new TextEncoder().encode(canonical))).slice(0, 32);
}

/** `config_id` of a tree. */
export function configId(tree: JsonTree): string {
  return configIdOfCanonical(canonicalJson(tree));
}
