import { test } from "node:test";
import assert from "node:assert/strict";
import { mechanismFromConfig } from "../src/mechanisms/registry.js";
import { loadCases, sources } from "./vectors.js";

for (const name of ["cms", "hcms", "pem", "pckv", "sfp", "multi"]) {
  test(`${name} reproduces every conformance vector`, () => {
    const cases = loadCases(name);
    assert.ok(cases.length > 0);
    cases.forEach((c, index) => {
      const mechanism = mechanismFromConfig(c.config);
      const options = sources(c);
      const reports = mechanism.perturb([c.value], options);
      assert.deepEqual(mechanism.toWire(reports)[0], c.payload, `${name} case ${index}`);
    });
  });
}
