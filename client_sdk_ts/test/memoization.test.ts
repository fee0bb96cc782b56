import { test } from "node:test";
import assert from "node:assert/strict";
import { hmac } from "@noble/hashes/hmac";
import { sha256 } from "@noble/hashes/sha256";
import { canonicalJson, configId, parseJson, pythonFloatRepr, toPlain } from "../src/config.js";
import { deviceChoice, largestThreshold } from "../src/memo-chain.js";
import { DeviceKeys, memoScope } from "../src/memoization.js";
import { Rational } from "../src/rational.js";
import { base64Url, encodeBitRow, fromHex, packBits, toHex, unpackBits } from "../src/wire.js";
import { HmacWordSource } from "../src/words.js";

const te = new TextEncoder();

test("the keyed source is HMAC-SHA256(secret, len32(tag) len32(scope) len32(label) index BE)", () => {
  const secret = new Uint8Array(32).map((_, i) => 255 - i);
  const keys = new DeviceKeys(secret, "scope-é");
  const frame = (text: string): number[] => {
    const bytes = te.encode(text);
    return [0, 0, bytes.length >> 8, bytes.length & 255, ...bytes];
  };
  const index = [0, 0, 0, 0, 0, 0, 1, 2];
  const message = new Uint8Array([...frame("ldp-telemetry/memo/v1"), ...frame("scope-é"), ...frame("value"), ...index]);
  const expected = new HmacWordSource(hmac(sha256, secret, message)).words(5);
  assert.deepEqual(keys.source("value", 258).words(5), expected);
  const ledger = new Uint8Array([...frame("ldp-telemetry/ledger/v1"), ...frame("scope-é"), ...frame("value"), ...index]);
  assert.equal(keys.key("value", 258n), toHex(hmac(sha256, secret, ledger)));
  assert.notDeepEqual(keys.source("value", 259).words(1), expected.subarray(0, 1));
  assert.throws(() => keys.source("value", -1), /memo index must be an integer in \[0, 2\*\*64\)/);
  assert.throws(() => new DeviceKeys(new Uint8Array(15), "s"), /at least 16 bytes/);
  assert.equal(String(keys).includes(toHex(secret)), false);
  // a device choice is uniformBelow(high, 1) from the label's source, index 0
  assert.equal(deviceChoice(keys, "multi:unit", 1), 0);
  assert.equal(deviceChoice(keys, "multi:unit", 7), Number(keys.source("multi:unit", 0).words(1)[0]! % 7n));
});

test("canonical JSON keeps Python's floats and sorts keys by code point", () => {
  const tree = parseJson('{"k": 5, "epsilon": 1.0, "b": [1e-06, 2.5E3, -0.0, 9007199254740991], "é": "x\\n", "\uD83D\uDE00": 1, "\uFFFF": 2}');
  assert.equal(
    canonicalJson(tree),
    '{"b":[1e-06,2500.0,-0.0,9007199254740991],"epsilon":1.0,"k":5,"é":"x\\n","\uFFFF":2,"\uD83D\uDE00":1}',
  );
  assert.deepEqual(toPlain(parseJson('{"a": [1, 2.0, "s", null, true]}')), { a: [1, 2, "s", null, true] });
  assert.throws(() => parseJson('{"a": 1,}'), /not JSON: expected a key/);
  // an integer no JSON reader holds exactly is refused, not rounded into a different config_id
  assert.throws(() => parseJson('{"a": 100000000000000000000}'), /an integer beyond 2\^53/);
  // Python's repr(float)
  const cases: [number, string][] = [
    [1, "1.0"],
    [0.1, "0.1"],
    [1e-5, "1e-05"],
    [0.0001, "0.0001"],
    [1e16, "1e+16"],
    [1234567890123456.0, "1234567890123456.0"],
    [1.5e300, "1.5e+300"],
    [-2.5e-7, "-2.5e-07"],
    [123.456, "123.456"],
    [5e-324, "5e-324"],
  ];
  for (const [value, text] of cases) assert.equal(pythonFloatRepr(value), text);
  // config_id of {"a": 1.0}: sha256('{"a":1.0}')[:32]
  assert.equal(configId(parseJson('{"a": 1.0}')), toHex(sha256(te.encode('{"a":1.0}'))).slice(0, 32));
});

test("the memo scope is config_id of {campaign, mechanism} over the canonical config", () => {
  const config = parseJson('{"mechanism": "grr", "k": 5, "epsilon": 1.0}');
  const text = '{"campaign":"app-theme","mechanism":{"epsilon":1.0,"k":5,"mechanism":"grr"}}';
  assert.equal(memoScope("app-theme", config), toHex(sha256(te.encode(text))).slice(0, 32));
  assert.notEqual(memoScope("app-theme", parseJson('{"mechanism": "grr", "k": 5, "epsilon": 1}')), memoScope("app-theme", config));
});

test("the chain threshold is the largest with ratio <= target, by bisection", () => {
  const ratio = (t: bigint): Rational => new Rational(t, 1000n);
  assert.equal(largestThreshold(ratio, 0n, 10n ** 6n, new Rational(777n)), 777000n);
  assert.equal(largestThreshold(ratio, 0n, 10n, new Rational(1n)), 10n);
  assert.throws(() => largestThreshold(ratio, 5n, 10n, new Rational(0n)), /no instantaneous randomization/);
});

test("bit rows: bit i is bit 7 - (i mod 8) of byte i/8, unpadded URL-safe base64", () => {
  const bits = [true, false, false, false, false, false, false, true, true];
  assert.deepEqual([...packBits(bits)], [0x81, 0x80]);
  assert.deepEqual(unpackBits(packBits(bits), 9), bits);
  assert.equal(encodeBitRow(bits), "gYA");
  assert.equal(base64Url(new Uint8Array([0xfb, 0xff])), "-_8");
  assert.equal(base64Url(new Uint8Array([1, 2, 3])), "AQID");
  assert.equal(base64Url(new Uint8Array([])), "");
  assert.equal(base64Url(new Uint8Array([0xff])), "_w");
  assert.deepEqual([...fromHex("00ff10")], [0, 255, 16]);
  assert.throws(() => fromHex("abc", "words_key"), /words_key must be a string of hex digits/);
});
