/**
 * src/zcdp.ts against Python's `client_sdk.zcdp` and `dp_parameter`: the `zcdp_epsilons` triples
 * and the `dap.dp` verdicts of conformance/dap_campaigns.json, Python 3.11's `Fraction` forms, the
 * conversion's boundaries and its errors.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { Rational } from "../src/rational.js";
import { DEFAULT_ORDERS, DP_FORMS, dpParameter, rdpToEpsilon, zcdpEpsilon } from "../src/zcdp.js";

interface Conformance {
  documents: { document: { dap?: { dp: unknown } }; valid: boolean; field?: string }[];
  zcdp_epsilons: { rho: number; delta: number; epsilon: number }[];
}

const CONFORMANCE = JSON.parse(readFileSync(new URL("../../../conformance/dap_campaigns.json", import.meta.url), "utf8")) as Conformance;

test("every zcdp_epsilons triple of conformance/dap_campaigns.json is met within 1e-9 relative", () => {
  assert.ok(CONFORMANCE.zcdp_epsilons.length >= 4);
  for (const { rho, delta, epsilon } of CONFORMANCE.zcdp_epsilons) {
    const got = zcdpEpsilon(rho, delta);
    assert.ok(Math.abs(got - epsilon) <= 1e-9 * epsilon, `rho ${rho}, delta ${delta}: ${got}, Python ${epsilon}`);
  }
});

test("the exact rho dpParameter reads gives the same epsilon as its double", () => {
  const { parameter } = dpParameter("gaussian:1/8");
  assert.ok(parameter !== null);
  assert.equal(zcdpEpsilon(parameter, 1e-6), zcdpEpsilon(0.125, 1e-6));
  assert.equal(zcdpEpsilon(dpParameter("gaussian:0.02").parameter as Rational, 1e-3), zcdpEpsilon(0.02, 1e-3));
});

test("DEFAULT_ORDERS is numpy's grid: 1.01..1.99 by 0.01, then 400 geometric orders from 2 to 1e5", () => {
  assert.equal(DEFAULT_ORDERS.length, 499);
  DEFAULT_ORDERS.slice(1).forEach((alpha, i) => assert.ok(alpha > (DEFAULT_ORDERS[i] as number), `not increasing at ${i + 1}`));
  for (let k = 1; k <= 99; k++) assert.equal(DEFAULT_ORDERS[k - 1], 1 + k / 100);
  assert.equal(DEFAULT_ORDERS[99], 2);
  assert.equal(DEFAULT_ORDERS[498], 1e5);
  const ratio = (1e5 / 2) ** (1 / 399);
  for (let i = 100; i < 498; i++) {
    const step = (DEFAULT_ORDERS[i + 1] as number) / (DEFAULT_ORDERS[i] as number);
    assert.ok(Math.abs(step - ratio) <= 1e-12, `ratio at ${i}: ${step}`);
  }
  assert.ok(Object.isFrozen(DEFAULT_ORDERS));
});

test("the grid's epsilon is within 1e-3 relative of the continuous optimum and never below it", () => {
  // The conversion of rho-zCDP at order alpha, minimised on a grid 100 times finer (CKS 2020,
  // Corollary 13); and Bun & Steinke's looser rho + 2 sqrt(rho ln(1/delta)) (Prop. 1.3) above.
  for (const [rho, delta] of [[0.125, 1e-6], [0.02, 1e-3], [0.5, 1e-9], [3, 1e-6], [1e-4, 1e-6]] as const) {
    let optimum = Infinity;
    for (let i = 0; i <= 50_000; i++) {
      const alpha = 1 + 1e-4 * (1e9 / 1e-4) ** (i / 50_000);
      optimum = Math.min(optimum, alpha * rho + Math.log1p(-1 / alpha) - (Math.log(delta) + Math.log(alpha)) / (alpha - 1));
    }
    const epsilon = zcdpEpsilon(rho, delta);
    assert.ok(epsilon >= optimum * (1 - 1e-9), `rho ${rho}, delta ${delta}: ${epsilon} below the optimum ${optimum}`);
    assert.ok(epsilon <= optimum * (1 + 1e-3), `rho ${rho}, delta ${delta}: ${epsilon}, optimum ${optimum}`);
    assert.ok(epsilon < rho + 2 * Math.sqrt(rho * Math.log(1 / delta)));
  }
});

test("epsilon grows with rho and shrinks with delta", () => {
  const rhos = [1e-4, 1e-3, 0.02, 0.125, 1, 10];
  rhos.slice(1).forEach((rho, i) => assert.ok(zcdpEpsilon(rho, 1e-6) > zcdpEpsilon(rhos[i] as number, 1e-6)));
  const deltas = [1e-12, 1e-9, 1e-6, 1e-3, 0.1];
  deltas.slice(1).forEach((delta, i) => assert.ok(zcdpEpsilon(0.125, delta) < zcdpEpsilon(0.125, deltas[i] as number)));
});

test("boundaries: delta 0, the KL shortcut, an infinite or NaN term", () => {
  assert.equal(zcdpEpsilon(0.125, 0), Infinity);
  assert.equal(rdpToEpsilon([2, 3], [0, 0], 0), 0);
  assert.equal(rdpToEpsilon([2, 3], [0, 1e-9], 0), Infinity);
  // delta >= sqrt(1 - e^-rdp) gives 0 (sqrt(1 - e^-0.01) = 0.09983); just below, the formula.
  assert.equal(rdpToEpsilon([2], [0.01], 0.1), 0);
  const formula = 0.01 + Math.log1p(-1 / 2) - (Math.log(0.09) + Math.log(2));
  assert.equal(rdpToEpsilon([2], [0.01], 0.09), formula);
  assert.ok(formula > 1);
  assert.equal(zcdpEpsilon(1e-5, 0.9), 0);
  // A tiny rho at a small delta: positive, and never negative anywhere.
  assert.ok(zcdpEpsilon(1e-8, 1e-9) > 0);
  assert.equal(rdpToEpsilon([2, 3], [Infinity, 0.5], 1e-6), rdpToEpsilon([3], [0.5], 1e-6));
  assert.equal(rdpToEpsilon([2], [Infinity], 1e-6), Infinity);
  assert.equal(rdpToEpsilon(Float64Array.of(2, 3), Float64Array.of(0.25, 0.5), 1e-6), rdpToEpsilon([2, 3], [0.25, 0.5], 1e-6));
  assert.ok(Number.isFinite(zcdpEpsilon(1e6, 1e-6)));
});

test("bad rho, delta and curves are refused naming the field and the type, never the value", () => {
  for (const rho of [0, -0.5, NaN, Infinity, "0.125", true, null, new Rational(0n), new Rational(-1n, 8n)]) {
    assert.throws(() => zcdpEpsilon(rho as number, 1e-6), (error: Error) => {
      assert.ok(error instanceof RangeError);
      assert.match(error.message, /^rho must be a positive finite number; got (a |an |null$)/);
      assert.ok(!error.message.includes("0.125") && !error.message.includes("-0.5"));
      return true;
    });
  }
  for (const delta of [-1e-6, 1, 1.5, NaN, "1e-6", undefined]) {
    assert.throws(() => zcdpEpsilon(0.125, delta as number), /^RangeError: delta must be a number in \[0, 1\); got a /);
  }
  assert.throws(() => rdpToEpsilon([2, 3], [1], 1e-6), /orders and rdp must be non-empty and of the same length; got 2 and 1/);
  assert.throws(() => rdpToEpsilon([], [], 1e-6), /non-empty/);
  assert.throws(() => rdpToEpsilon([2, 1], [1, 1], 1e-6), /^RangeError: orders\[1\] must be > 1; got a number/);
  assert.throws(() => rdpToEpsilon([2, NaN], [1, 1], 1e-6), /^TypeError: orders\[1\] must be a number, not NaN; got NaN$/);
  assert.throws(() => rdpToEpsilon([2, 3], [1, "1"] as number[], 1e-6), /^TypeError: rdp\[1\] must be a number, not NaN; got a string of 1 characters$/);
  assert.throws(() => rdpToEpsilon("23" as unknown as number[], [1, 1], 1e-6), /^TypeError: orders must be an array of numbers; got a string/);
});

test("dap.dp of the conformance documents: accepted where Python accepts it, refused naming dap.dp", () => {
  const accepted: string[] = [];
  let refused = 0;
  for (const { document, valid, field } of CONFORMANCE.documents) {
    if (document.dap === undefined) continue;
    const dp = document.dap.dp;
    if (field === "dap.dp") {
      assert.equal(valid, false);
      refused++;
      assert.throws(
        () => dpParameter(dp),
        (error: Error) => error instanceof RangeError && error.message === `dap.dp must be ${DP_FORMS}; got a string of ${String(dp).length} characters`,
        `${JSON.stringify(dp)} must be refused`,
      );
    } else {
      // Valid documents, and documents refused for another field, carry a dp Python accepts.
      const parsed = dpParameter(dp);
      accepted.push(parsed.parameter === null ? parsed.kind : `${parsed.kind}:${parsed.parameter.toString()}`);
    }
  }
  assert.ok(refused >= 5, `${refused} documents refused for dap.dp`);
  for (const expected of ["none", "laplace:1", "laplace:1/2", "gaussian:1/8", "gaussian:1/50"]) {
    assert.ok(accepted.includes(expected), `${expected} among ${accepted.join(", ")}`);
  }
});

test("dp parameters read as Python 3.11's Fraction reads them", () => {
  // [text after "gaussian:", the exact value Python's dp_parameter returns]
  const forms: [string, string][] = [
    ["1/8", "1/8"],
    ["0.02", "1/50"],
    ["+0.5", "1/2"],
    [" 0.5 ", "1/2"],
    ["\t1/8\n", "1/8"],
    [".5", "1/2"],
    ["5.", "5"],
    ["5.e-1", "1/2"],
    ["00.500", "1/2"],
    ["1_000", "1000"],
    ["0.1_25", "1/8"],
    ["1e-3", "1/1000"],
    ["1E+2", "100"],
    ["2e-1_0", "1/5000000000"],
    ["\u0661/\u0668", "1/8"], // Arabic-Indic digits
    ["\u{1D7D9}/\u{1D7E0}", "1/8"], // mathematical double-struck digits
    ["\uff11/\uff18", "1/8"], // fullwidth digits
    ["\u0966.\u096b", "1/2"], // Devanagari digits
    ["\xa00.5\u3000", "1/2"], // Unicode spaces
    ["\x1c0.5\x85", "1/2"], // Python's str.isspace() holds these, JavaScript's \s does not
    [`${"1_".repeat(2200)}1`, `${"1".repeat(2201)}`], // 2201 digits: underscores do not count
  ];
  for (const [text, value] of forms) {
    const parsed = dpParameter(`gaussian:${text}`);
    assert.equal(parsed.kind, "gaussian", JSON.stringify(text));
    assert.equal(parsed.parameter?.toString(), value, JSON.stringify(text));
  }
  assert.equal(dpParameter("laplace:3/4").kind, "laplace");
  assert.equal(dpParameter(`gaussian:0.${"0".repeat(4299)}1`).parameter?.den, 10n ** 4300n);
  assert.equal(dpParameter("gaussian:1e100000").parameter?.num, 10n ** 100000n);
  const refused = [
    "gaussian:0", "gaussian:-0.5", "gaussian:-0", "gaussian:", "gaussian:1e", "gauss:0.5", "Gaussian:0.5", "gaussian",
    " gaussian:0.5", "none ", "gaussian:1 / 8", "gaussian:1/ 8", "gaussian:1__0", "gaussian:_1", "gaussian:1_", "gaussian:1/0",
    "gaussian:0/5", "gaussian:1/-8", "gaussian:1.5/2", "gaussian:inf", "gaussian:nan", "gaussian:1.d", "gaussian:0x10",
    "gaussian:1:2", "laplace:1/8:", "gaussian:+-1", "gaussian:\ufeff0.5", "gaussian:0.5\u200b",
    // Python's int refuses more than 4300 digits; the device also refuses exponents above 100000
    `gaussian:${"1".repeat(4301)}`, `gaussian:0.${"0".repeat(4300)}1`, `gaussian:1/${"7".repeat(4301)}`, "gaussian:1e100001",
  ];
  for (const dp of refused) {
    assert.throws(() => dpParameter(dp), (error: Error) => error instanceof RangeError && error.message.startsWith("dap.dp must be "), JSON.stringify(dp));
  }
  for (const dp of [5, null, undefined, ["gaussian:1"], { gaussian: 1 }]) {
    assert.throws(() => dpParameter(dp), /^RangeError: dap\.dp must be .*; got (a|an|null)/);
  }
  assert.throws(() => dpParameter("gaussian:-1", "dp"), /^RangeError: dp must be "none", "laplace:EPSILON" or "gaussian:RHO" \(EPSILON, RHO > 0\); got a string of 11 characters$/);
});
