import { test } from "node:test";
import assert from "node:assert/strict";
import { mechanismFromConfig } from "../src/mechanisms/registry.js";
import type { KeyedPerturbOptions } from "../src/mechanisms/bounded.js";
import { caseKeys, caseWords, loadCases } from "./numeric-vectors.js";

const NUMERIC = ["duchi", "piecewise", "hybrid", "laplace", "gaussian", "onebitmean", "square_wave", "fourier"];

for (const name of NUMERIC) {
  test(`${name}: every conformance vector reproduced`, () => {
    const cases = loadCases(name);
    cases.forEach((c, index) => {
      const mechanism = mechanismFromConfig(c.config);
      const options: KeyedPerturbOptions = { rng: caseWords(c) };
      const keys = caseKeys(c);
      if (keys !== undefined) options.keys = keys;
      const reports = mechanism.perturb([c.value], options);
      assert.deepEqual(mechanism.toWire(reports)[0], c.payload, `${name}.json case ${index}`);
    });
  });
}
