// The browser bundle (dist/browser.js and its chunks under dist/browser/, which npm test builds):
// the chunks borrow code from the entry and from the categorical chunk and bundle their own
// copies of the rest (scripts/build-browser.mjs), so each group is checked here against the
// conformance vectors through the bundle's own `loadMechanism`, every case reproduced exactly.
import assert from "node:assert/strict";
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { parseVectorFile } from "../src/conformance.js";
import { DEFAULT_VECTORS } from "../src/conformance-cli.js";
import { DeviceKeys, memoScope } from "../src/memoization.js";
import { fromHex } from "../src/wire.js";

type Bundle = typeof import("../src/browser.js");
const bundle = (await import(new URL("../browser.js", import.meta.url).href)) as Bundle;
const files = readdirSync(DEFAULT_VECTORS).filter((name) => name.endsWith(".json")).sort();

test("every mechanism with vectors is one the bundle loads", () => {
  const mechanisms = files.map((name) => parseVectorFile(readFileSync(join(DEFAULT_VECTORS, name), "utf-8")).mechanism);
  assert.ok(mechanisms.length >= 24, `${DEFAULT_VECTORS}: ${mechanisms.length} files`);
  for (const mechanism of mechanisms) assert.ok(Object.hasOwn(bundle.MECHANISM_GROUPS, mechanism), `${mechanism} is not in the bundle`);
});

for (const name of files) {
  test(`conformance/vectors/${name} through the browser bundle's chunks`, async () => {
    const file = parseVectorFile(readFileSync(join(DEFAULT_VECTORS, name), "utf-8"));
    for (const [index, vector] of file.cases.entries()) {
      const mechanism = await bundle.loadMechanism(vector.config);
      const rng = new bundle.HmacWordSource(fromHex(vector.wordsKey, "words_key"));
      const options =
        vector.deviceSecret !== undefined && vector.campaign !== undefined
          ? { rng, keys: new DeviceKeys(fromHex(vector.deviceSecret, "device_secret"), memoScope(vector.campaign, vector.configJson)) }
          : { rng };
      assert.deepEqual(mechanism.toWire(mechanism.perturb([vector.value], options))[0], vector.payload, `${name} case ${index}`);
    }
  });
}
