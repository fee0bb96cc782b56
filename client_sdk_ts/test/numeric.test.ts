import { test } from "node:test";
import assert from "node:assert/strict";
import { mechanismFromConfig } from "../src/mechanisms/registry.js";
import { CATEGORICAL_FACTORIES } from "../src/mechanisms/categorical.js";
import type { KeyedPerturbOptions } from "../src/mechanisms/bounded.js";
import { caseKeys, caseWords, loadCases } from "./numeric-vectors.js";

const NUMERIC = ["duchi", "piecewise", "hybrid", "laplace", "gaussian", "onebitmean", "square_wave", "fourier", "hierarchical"];

for (const name of NUMERIC) {
  loadCases(name).forEach((c, index) => {
    // the B-ary tree's levels run h-tscore's grr and oue
    const needsOracles = name === "hierarchical" && c.config["variant"] === undefined;
    const skip = needsOracles && CATEGORICAL_FACTORIES["grr"] === undefined ? "grr/oue not merged yet" : false;
    test(`${name}.json case ${index} reproduced`, { skip }, () => {
      const mechanism = mechanismFromConfig(c.config);
      const options: KeyedPerturbOptions = { rng: caseWords(c) };
      const keys = caseKeys(c);
      if (keys !== undefined) options.keys = keys;
      const reports = mechanism.perturb([c.value], options);
      assert.deepEqual(mechanism.toWire(reports)[0], c.payload);
    });
  });
}
