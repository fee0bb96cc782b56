/**
 * The shuffle amplification bound and the policy's central ceiling against Python's figures and
 * verdicts (conformance/policy_shuffle.json, written by tests/client_sdk/policy_shuffle_vectors.py).
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { cloneDelta, cloneDeltaWithError, confirmsTarget, formatG, lgamma, numericalEpsilon, shufflePlan } from "../src/amplification.js";
import "../src/index.js"; // registers the bound with the policy, as Node's entry does
import { PolicyViolation, type PrivacyClaim, PrivacyPolicy, type PrivacyPolicyOptions } from "../src/policy.js";

interface BoundCase {
  epsilon: number;
  epsilon0: number;
  n: number;
  delta?: number;
  clone_delta: number;
  numerical_epsilon?: number;
}
interface PolicyCase {
  name: string;
  policy: PrivacyPolicyOptions;
  mechanism: { mechanism: string; epsilon: number };
  shuffle: Record<string, unknown> | null;
  through_shuffler: boolean;
  claim: { epsilon: number; delta: number; memoized: boolean; epsilon_inf?: number };
  verdict:
    | { accept: true }
    | { field: string; campaign_value: unknown; policy_value: unknown; note: string | null }
    | { error_contains: string[] };
  central_epsilon: number | null;
}
const vectors = JSON.parse(readFileSync(new URL("../../../conformance/policy_shuffle.json", import.meta.url), "utf8")) as {
  bound_cases: BoundCase[];
  policy_cases: PolicyCase[];
  policy_errors: { policy: Record<string, unknown>; field: string }[];
};

test("cloneDelta is Python's clone_delta to within its own error bound, on every case", () => {
  assert.ok(vectors.bound_cases.length >= 600);
  let identical = 0;
  let worst = 0;
  for (const c of vectors.bound_cases) {
    const [figure, error] = cloneDeltaWithError(c.epsilon, c.epsilon0, c.n);
    const at = `clone_delta(${c.epsilon}, ${c.epsilon0}, ${c.n})`;
    assert.equal(figure, cloneDelta(c.epsilon, c.epsilon0, c.n), at);
    assert.ok(Math.abs(figure - c.clone_delta) <= error, `${at}: ${figure} vs Python's ${c.clone_delta}, bound ${error}`);
    if (figure === c.clone_delta) identical++;
    else worst = Math.max(worst, Math.abs(figure - c.clone_delta) / error);
    // the bound is not vacuous: under 1% of the figure even at epsilon0 = 0.1, n = 10^6
    if (c.clone_delta > 1e-12) assert.ok(error <= 1e-2 * c.clone_delta, `${at}: error bound ${error} is too loose`);
  }
  // most figures are Python's to the bit; the others are far inside the bound (a hundredth)
  assert.ok(identical >= vectors.bound_cases.length / 3, `only ${identical} identical`);
  assert.ok(worst < 0.01, `worst difference ${worst} of the bound`);
});

test("numericalEpsilon takes Python's bisection steps: the same figure, bit for bit", () => {
  let checked = 0;
  for (const c of vectors.bound_cases) {
    if (c.delta === undefined || c.n > 1e5) continue; // n = 10^6 takes seconds; the policy cases cover it
    assert.equal(numericalEpsilon(c.epsilon0, c.n, c.delta), c.numerical_epsilon, `numerical_epsilon(${c.epsilon0}, ${c.n}, ${c.delta})`);
    checked++;
  }
  assert.ok(checked >= 140);
});

test("a device never confirms a target Python refuses, and confirms what Python accepts with room", () => {
  let refusedNearTheTarget = 0;
  for (const c of vectors.bound_cases) {
    if (c.clone_delta <= 0) continue;
    // the target delta at Python's own figure, a hair above and a hair below it
    for (const delta of [c.clone_delta, c.clone_delta * (1 + 1e-3), c.clone_delta * (1 - 1e-12)]) {
      if (!(delta < 1)) continue;
      const device = confirmsTarget(c.epsilon, c.epsilon0, c.n, delta);
      if (device) assert.ok(c.clone_delta <= delta, `confirmed where Python refuses: ${JSON.stringify(c)} at ${delta}`);
      else if (c.clone_delta <= delta) refusedNearTheTarget++;
    }
    if (c.clone_delta > 1e-12 && c.clone_delta * 1.01 < 1) {
      assert.ok(confirmsTarget(c.epsilon, c.epsilon0, c.n, c.clone_delta * 1.01), `refused 1% above Python's figure: ${JSON.stringify(c)}`);
    }
  }
  assert.ok(refusedNearTheTarget > 0, "the margin is exercised");
});

function claimOf(c: PolicyCase): PrivacyClaim {
  const claim = {
    mechanism: c.mechanism.mechanism,
    epsilon: c.claim.epsilon,
    delta: c.claim.delta,
    shuffle: c.shuffle,
    throughShuffler: c.through_shuffler,
  };
  return c.claim.memoized ? { ...claim, epsilonInf: c.claim.epsilon_inf as number } : claim;
}

test("every policy case of conformance/policy_shuffle.json gets Python's verdict, field and figures", () => {
  assert.ok(vectors.policy_cases.length >= 20);
  for (const c of vectors.policy_cases) {
    const policy = new PrivacyPolicy(c.policy);
    const check = (): void => policy.check("c", claimOf(c), "0".repeat(32));
    const verdict = c.verdict;
    if ("accept" in verdict) {
      assert.doesNotThrow(check, c.name);
    } else if ("error_contains" in verdict) {
      assert.throws(check, (error: Error) => {
        assert.ok(!(error instanceof PolicyViolation), c.name);
        for (const part of verdict.error_contains) assert.ok(error.message.includes(part), `${c.name}: ${error.message}`);
        return true;
      });
    } else {
      assert.throws(check, (error: Error) => {
        assert.ok(error instanceof PolicyViolation, `${c.name}: ${error.message}`);
        assert.equal(error.field, verdict.field, c.name);
        assert.equal(error.campaignValue, verdict.campaign_value, c.name);
        assert.equal(error.policyValue, verdict.policy_value, c.name);
        if (verdict.note !== null) assert.ok(error.message.endsWith(` (${verdict.note})`), `${c.name}: ${error.message}`);
        return true;
      });
    }
    if (c.central_epsilon !== null && c.shuffle !== null) {
      const plan = shufflePlan(c.shuffle);
      assert.equal(numericalEpsilon(c.claim.epsilon, plan.min_batch, plan.delta), c.central_epsilon, c.name);
    }
  }
});

test("policies Python refuses at construction are refused naming the field", () => {
  for (const c of vectors.policy_errors) {
    assert.throws(() => new PrivacyPolicy(c.policy as PrivacyPolicyOptions), (error: Error) => error.message.startsWith(c.field), c.field);
  }
  const policy = new PrivacyPolicy({ max_central_epsilon: 1, max_central_delta: 1e-8, max_shuffled_epsilon: 12 });
  assert.deepEqual([policy.max_central_epsilon, policy.max_central_delta, policy.max_shuffled_epsilon], [1, 1e-8, 12]);
  assert.deepEqual([new PrivacyPolicy().max_central_epsilon, new PrivacyPolicy().max_central_delta], [null, 1e-6]);
});

test("a bad shuffle object names the field and the value's type", () => {
  assert.throws(() => shufflePlan([1]), /shuffle must be a JSON object or null; got a value of type array/);
  assert.throws(() => shufflePlan({ min_batch: 10, central_epsilon: 1 }), /shuffle needs exactly .*missing \["delta"\]/);
  assert.throws(() => shufflePlan({ min_batch: 10, central_epsilon: 1, delta: 1e-6, extra: 1 }), /unknown \["extra"\]/);
  assert.throws(() => shufflePlan({ min_batch: 10, central_epsilon: 1, delta: "1e-6" }), /shuffle.delta must be a number in \(0, 1\); got a value of type string/);
  assert.throws(() => shufflePlan({ min_batch: 2.5, central_epsilon: 1, delta: 1e-6 }), /shuffle.min_batch must be an integer/);
  assert.throws(() => shufflePlan({ min_batch: 10, central_epsilon: 41, delta: 1e-6 }), /shuffle.central_epsilon must be at most 40/);
  assert.deepEqual(shufflePlan({ min_batch: 10, central_epsilon: 1, delta: 1e-6 }), { min_batch: 10, central_epsilon: 1, delta: 1e-6 });
});

test("lgamma is CPython's at exact points, and formatG is Python's format(x, '.Ng')", () => {
  assert.equal(lgamma(1), 0);
  assert.equal(lgamma(2), 0);
  assert.ok(Math.abs(lgamma(3) - Math.LN2) < 1e-15);
  assert.ok(Math.abs(lgamma(11) - Math.log(3628800)) < 1e-13);
  const cases: [number, number, string][] = [
    [9, 4, "9"], [1.0045993571749876, 4, "1.005"], [1.000119530029297, 4, "1"], [1e-6, 6, "1e-06"], [1e-5, 6, "1e-05"],
    [0.0001234, 4, "0.0001234"], [123456, 4, "1.235e+05"], [1234, 4, "1234"], [12345, 4, "1.234e+04"], [12355, 4, "1.236e+04"], [0.5, 6, "0.5"],
    [2.5e-10, 6, "2.5e-10"], [1.03125, 4, "1.031"], [1.09375, 4, "1.094"], [-0.000125, 2, "-0.00013"], [9.9995, 4, "9.999"], [99.995, 4, "100"],
    [0.00012345, 3, "0.000123"], [1e16, 4, "1e+16"], [5e-5, 1, "5e-05"], [0.9999818241882322, 4, "1"], [123.5, 3, "124"], [122.5, 3, "122"],
  ];
  for (const [x, precision, text] of cases) assert.equal(formatG(x, precision), text, `format(${x}, '.${precision}g')`);
});
