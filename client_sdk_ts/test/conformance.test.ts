import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { isPorted, parseVectorFile, runCase } from "../src/conformance.js";
import { DEFAULT_VECTORS } from "../src/conformance-cli.js";

const files = readdirSync(DEFAULT_VECTORS).filter((name) => name.endsWith(".json")).sort();

test("the vector folder is found from the built tests", () => {
  assert.ok(files.length >= 24, `${DEFAULT_VECTORS}: ${files.length} files`);
});

for (const name of files) {
  test(`conformance/vectors/${name}: every case reproduced exactly`, () => {
    const file = parseVectorFile(readFileSync(join(DEFAULT_VECTORS, name), "utf-8"));
    // every mechanism with vectors is required: an unported one fails, it is never skipped
    assert.ok(isPorted(file.mechanism), `${file.mechanism} is not ported`);
    file.cases.forEach((vector, index) => {
      assert.deepEqual(runCase(vector), vector.payload, `${name} case ${index}`);
    });
  });
}
