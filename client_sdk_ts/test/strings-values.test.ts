/** String handling (UTF-8 as Python encodes it, the reserved symbol) and the errors of the
 * string and record mechanisms: each names the field and the value's type, never the value. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mechanismFromConfig } from "../src/mechanisms/registry.js";
import { RESERVED, isWellFormed, representable } from "../src/mechanisms/string-support.js";
import { log } from "../src/mechanisms/correctly-rounded.js";
import { expDouble as exp } from "../src/rational.js";
import { DeviceKeys } from "../src/memoization.js";
import { HmacWordSource } from "../src/words.js";

const CMS = { mechanism: "cms", epsilon: 4.0, m: 64, hashes: 4, max_length: 8, seed: 0 };
const PEM = { mechanism: "pem", epsilon: 2.0, max_length: 4, start_bits: 5, step_bits: 4, g: 8, final_weight: 1 };
const key = (i: number): HmacWordSource => new HmacWordSource(new Uint8Array(32).fill(i));

test("representable: UTF-8 bytes as Python encodes them, by bytes or (alphabet) by code points", () => {
  assert.deepEqual(representable("", 4), new Uint8Array(0));
  assert.deepEqual(representable("é", 4), Uint8Array.of(0xc3, 0xa9));
  assert.deepEqual(representable("😀", 4), Uint8Array.of(0xf0, 0x9f, 0x98, 0x80));
  assert.equal(representable("😀a", 4), RESERVED); // 5 bytes
  assert.equal(representable("abcde", 4), RESERVED);
  const alphabet = new Set(["a", "b", "😀"]);
  assert.deepEqual(representable("😀😀😀😀", 4, alphabet).length, 16); // 4 characters, astral
  assert.equal(representable("abc", 4, alphabet), RESERVED); // c is outside
  assert.equal(representable("aaaaa", 4, alphabet), RESERVED); // 5 characters
});

test("a lone surrogate is the reserved symbol (Python cannot encode it; TextEncoder would write U+FFFD)", () => {
  for (const lone of ["\ud800", "a\udc00", "\udbff\udbff", "x\ud83d"]) {
    assert.equal(isWellFormed(lone), false);
    assert.equal(representable(lone, 16), RESERVED);
  }
  assert.equal(isWellFormed("\ud83d\ude00"), true);
});

test("every value a mechanism cannot carry gives the reserved symbol's report", () => {
  for (const config of [CMS, { ...CMS, mechanism: "hcms" }, PEM]) {
    const m = mechanismFromConfig(config);
    // pem's level comes from the device's keyed source; cms and hcms take none
    const keys = config.mechanism === "pem" ? new DeviceKeys(new Uint8Array(32).fill(9), "scope") : undefined;
    const payload = (value: string): unknown => m.toWire(m.perturb([value], keys ? { rng: key(1), keys } : { rng: key(1) }))[0];
    const reserved = payload("\ud800");
    assert.deepEqual(payload("y".repeat(9)), reserved, config.mechanism);
    assert.deepEqual(payload("é".repeat(5)), reserved, config.mechanism); // 10 bytes
    assert.notDeepEqual(payload("home"), reserved, config.mechanism);
  }
});

test("a value that is not a string is refused with its position and type, not its value", () => {
  for (const name of ["cms", "hcms", "pem", "sfp"]) {
    const config =
      name === "pem"
        ? PEM
        : name === "sfp"
          ? { mechanism: "sfp", epsilon: 2.0, max_length: 8, m: 256, hashes: 4, fragment_share: 0.75, fragment_blocks: 9, seed: 0 }
          : { ...CMS, mechanism: name };
    const m = mechanismFromConfig(config);
    const secret = 424242;
    assert.throws(
      () => m.perturb(["ok", secret], { rng: key(2) }),
      (e: Error) => e.message === "values[1] must be a string; got number" && !e.message.includes("424242"),
    );
  }
});

test("bad configs are refused naming the field", () => {
  const cases: [Record<string, unknown>, RegExp][] = [
    [{ ...CMS, m: 48 }, /: m must be a power of two; got 48$/],
    [{ ...CMS, m: "64" }, /: m must be an integer; got string$/],
    [{ ...CMS, hashes: undefined }, /: hashes must be an integer; got undefined$/],
    [{ ...CMS, epsilon: -1 }, /: epsilon must be in \(0, 700\]; got -1$/],
    [{ ...CMS, colour: 1 }, /config for "cms" has unknown field\(s\) colour/],
    [{ mechanism: "hcms", epsilon: 1, m: 4, hashes: 1, seed: 0 }, /config for "hcms" is missing max_length/],
    [{ ...CMS, longitudinal: { epsilon_permanent: 1.0 } }, /epsilon_permanent must be >= epsilon/],
    [{ ...CMS, longitudinal: 3 }, /: longitudinal must be an object; got number$/],
    [{ ...CMS, longitudinal: { epsilon_permanent: 5, e: 1 } }, /: longitudinal has unknown field\(s\) e$/],
    [{ ...PEM, alphabet: "abca" }, /: alphabet must not repeat a character$/],
    [{ ...PEM, alphabet: "ab\ud800" }, /: alphabet must be valid Unicode/],
    [{ ...PEM, alphabet: 5 }, /: alphabet must be a non-empty string of the distinct characters values use; got number$/],
    [{ ...PEM, start_bits: 2 }, /: start_bits must be in \[3, 35\]; got 2$/],
    [{ ...PEM, epsilon: 31 }, /: epsilon must be at most 30 for pem; got 31$/],
    [
      { mechanism: "sfp", epsilon: 2, max_length: 8, m: 256, hashes: 4, fragment_share: 0.75, fragment_blocks: 4, seed: 0 },
      /: fragment_blocks must be ceil\(65536\/\(b - 1\)\) for a power of two b; got 4$/,
    ],
    [
      { mechanism: "sfp", epsilon: 2, max_length: 8, m: 256, hashes: 4, fragment_blocks: 9, seed: 0 },
      /config for "sfp" is missing fragment_share/,
    ],
    [{ mechanism: "pckv", epsilon: 2, k: 4 }, /config for "pckv" is missing padding: padding \(l, an integer >= 1\) is required/],
    [{ mechanism: "pckv", epsilon: 2, k: 4, padding: 2, variant: 7 }, /: variant must be "grr" or "ue"; got number$/],
    [{ mechanism: "multi", epsilon: 2, protocol: "abc", attributes: [] }, /: protocol must be one of spl, smp, rsfd; got string$/],
    [
      { mechanism: "multi", epsilon: 2, protocol: "smp", attributes: [{ name: "a", k: 2 }, { name: "b", k: 3 }], marginals: [["a", "b"]] },
      /: table_oracles is missing/,
    ],
    [
      { mechanism: "multi", epsilon: 2, protocol: "spl", attributes: [{ name: "a", k: 2, labels: ["x"] }] },
      /: attributes\[0\]\.labels must be 2 distinct strings; got array$/,
    ],
  ];
  for (const [config, message] of cases) {
    assert.throws(() => mechanismFromConfig(config as { mechanism: string }), message, JSON.stringify(config));
  }
});

test("a memoized config without the device's keyed source is refused", () => {
  for (const config of [
    { ...CMS, longitudinal: { epsilon_permanent: 6.0 } },
    { ...CMS, mechanism: "hcms", longitudinal: { epsilon_permanent: 6.0 } },
    { ...PEM, longitudinal: { epsilon_permanent: 3.0 } },
  ]) {
    const m = mechanismFromConfig(config);
    assert.throws(() => m.perturb(["home"], { rng: key(3) }), /perturb needs \{keys\}/);
  }
});

test("pckv refuses bad records naming the position and type, never the key or the number", () => {
  const m = mechanismFromConfig({ mechanism: "pckv", epsilon: 2, k: 4, padding: 2 });
  const refuse = (record: unknown, message: RegExp): void => {
    assert.throws(() => m.perturb([{}, record as Record<string, number>], { rng: key(4) }), (e: Error) => {
      assert.match(e.message, message);
      assert.doesNotMatch(e.message, /0\.123|secret/);
      return true;
    });
  };
  refuse({ "7": 0.123 }, /^values\[1\] has a key that is not an integer in \[0, 4\) \(a string\)/);
  refuse({ secret: 0.123 }, /^values\[1\] has a key that is not an integer in \[0, 4\) \(a string\)/);
  refuse({ "1": "0.123" }, /^values\[1\]: each key's number must be in \[-1, 1\]; got string$/);
  refuse({ "1": 1.5 }, /^values\[1\]: each key's number must be in \[-1, 1\]; got number$/);
  refuse({ "1": Number.NaN }, /got NaN/);
  refuse([0.123], /^values\[1\] must be an object key index -> number; got array$/);
});

test("pckv's report does not depend on the order of a record's keys", () => {
  const m = mechanismFromConfig({ mechanism: "pckv", epsilon: 2, k: 8, padding: 3 });
  const a = m.toWire(m.perturb([{ "5": 0.5, "1": -0.5, "3": 0 }], { rng: key(5) }));
  const b = m.toWire(m.perturb([new Map([[3, 0], [5, 0.5], [1, -0.5]])], { rng: key(5) }));
  assert.deepEqual(a, b);
});

test("multi refuses bad records naming the attribute and the type, never the label", () => {
  const m = mechanismFromConfig({
    mechanism: "multi",
    epsilon: 2,
    protocol: "spl",
    attributes: [{ name: "os", k: 2, labels: ["ios", "web"] }, { name: "size", k: 3 }],
  });
  const refuse = (record: unknown, message: RegExp): void => {
    assert.throws(
      () => m.perturb([record as Record<string, string>], { rng: key(6) }),
      (e: Error) => message.test(e.message) && !e.message.includes("hidden-label"),
    );
  };
  refuse({ os: "hidden-label", size: 1 }, /values\[0\], attribute "os" \(a string\) must be one of its 2 labels/);
  refuse({ os: "ios", size: 3 }, /values\[0\], attribute "size" \(a number\) must be an integer in \[0, 3\)/);
  refuse({ os: "ios" }, /values\[0\] misses attribute "size"/);
  refuse({ os: "ios", size: 1, extra: "hidden-label" }, /values\[0\] has unknown attribute\(s\); the attributes are os, size/);
  refuse([0, 5], /values\[0\]\[1\] \(size, a number\) must be an integer in \[0, 3\)/);
  refuse("hidden-label", /^values\[0\] must be an object attribute -> value; got string$/);
  // indices in attribute order are the same record as labels
  const byLabel = m.toWire(m.perturb([{ os: "web", size: 2 }], { rng: key(7) }));
  assert.deepEqual(m.toWire(m.perturb([[1, 2]], { rng: key(7) })), byLabel);
});

test("exp and log are correctly rounded, where V8's Math.exp is one ulp off", () => {
  // e^1.8372365326216968 = 6.27916200336485411...: Math.exp gives 6.2791620033648545
  assert.equal(exp(1.8372365326216968), 6.279162003364854);
  assert.equal(exp(40), 2.3538526683702e17);
  assert.equal(exp(0), 1);
  assert.equal(log(Math.E), 1);
  assert.equal(log(1), 0);
  // within one ulp of the platform's everywhere (a gross error would show)
  for (let i = 1; i <= 2000; i++) {
    const x = i / 50;
    const ulp = (v: number): number => Math.abs(v) * 2 ** -52;
    assert.ok(Math.abs(exp(x) - Math.exp(x)) <= ulp(Math.exp(x)), `exp(${x})`);
    assert.ok(Math.abs(log(x) - Math.log(x)) <= ulp(Math.log(x)) + Number.MIN_VALUE, `log(${x})`);
  }
});

test("the default source is the platform CSPRNG (two calls differ)", () => {
  const m = mechanismFromConfig(CMS);
  const a = m.toWire(m.perturb(Array(20).fill("home")));
  const b = m.toWire(m.perturb(Array(20).fill("home")));
  assert.notDeepEqual(a, b);
});

test("the device counts its reserved strings and pckv's records over the padding (never sent)", () => {
  const values = ["home", "", "y".repeat(9), "\ud800", "é".repeat(4), "é".repeat(5)];
  for (const config of [CMS, { ...CMS, mechanism: "hcms" }]) {
    const m = mechanismFromConfig(config) as unknown as { reservedCount(v: string[]): number };
    assert.equal(m.reservedCount(values), 3, config.mechanism);
  }
  const pem = mechanismFromConfig({ ...PEM, alphabet: "hoeé" }) as unknown as { reservedCount(v: string[]): number };
  assert.equal(pem.reservedCount(["hoe", "éééé", "ééééé", "x", "\ud800", ""]), 3);
  const pckv = mechanismFromConfig({ mechanism: "pckv", epsilon: 2, k: 4, padding: 2 }) as unknown as {
    deviceCounters(v: unknown[]): Record<string, number>;
  };
  assert.deepEqual(pckv.deviceCounters([{}, { "0": 1, "1": 0, "2": 0 }, { "3": 0.5, "1": 0 }]), {
    pckv_records_over_padding: 1,
  });
});

test("a plain mechanism refuses the keyed source; each says whether it needs one", () => {
  const keys = new DeviceKeys(new Uint8Array(32).fill(9), "scope");
  const sfp = { mechanism: "sfp", epsilon: 2.0, max_length: 8, m: 256, hashes: 4, fragment_share: 0.75, fragment_blocks: 9, seed: 0 };
  const plain: [Record<string, unknown>, unknown][] = [
    [CMS, "home"],
    [{ ...CMS, mechanism: "hcms" }, "home"],
    [sfp, "home"],
    [{ mechanism: "pckv", epsilon: 2, k: 4, padding: 2 }, { "1": 0.5 }],
  ];
  for (const [config, value] of plain) {
    const m = mechanismFromConfig(config as { mechanism: string });
    assert.ok(m.memoized !== true && m.usesDeviceChoices !== true, config.mechanism as string);
    assert.throws(() => m.perturb([value], { rng: key(8), keys }), /is not memoized; it takes no keys/);
  }
  const keyed = [
    { ...CMS, longitudinal: { epsilon_permanent: 6.0 } },
    { ...sfp, longitudinal: { epsilon_permanent: 6.0 } },
    PEM,
    { mechanism: "multi", epsilon: 2, protocol: "spl", attributes: [{ name: "a", k: 2 }] },
  ];
  for (const config of keyed) {
    const m = mechanismFromConfig(config);
    assert.ok(m.memoized === true || m.usesDeviceChoices === true, config.mechanism);
  }
});
