// The browser bundle (dist/browser.js and its chunks under dist/browser/, which npm test builds):
// the chunks borrow code from the entry and bundle their own copies of the rest
// (scripts/build-browser.mjs), so each group is checked here against the conformance vectors
// through the bundle's own `loadMechanism`, every case reproduced exactly, and each chunk's
// borrowed names against the modules they come from; and the single-module build
// (dist/browser-full.js) the same way.
import assert from "node:assert/strict";
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { parseVectorFile } from "../src/conformance.js";
import { DEFAULT_VECTORS } from "../src/conformance-cli.js";
import { DeviceKeys, memoScope } from "../src/memoization.js";
import type { Mechanism, MechanismConfig } from "../src/mechanisms/types.js";
import { fromHex } from "../src/wire.js";

type Bundle = typeof import("../src/browser.js") & { __ldpModules: readonly unknown[] };
interface Meta {
  chunks: Record<string, { file: string; mechanisms?: string[]; imports: string[]; borrows: [string, string, number][] }>;
}
const dist = new URL("../", import.meta.url);
const bundle = (await import(new URL("browser.js", dist).href)) as Bundle;
/** The single-module build (src/browser-full.ts): every mechanism at once. */
const full = (await import(new URL("browser-full.js", dist).href)) as typeof import("../src/browser-full.js");
const meta = JSON.parse(readFileSync(new URL("browser-meta.json", dist), "utf-8")) as Meta;
const files = readdirSync(DEFAULT_VECTORS).filter((name) => name.endsWith(".json")).sort();

test("every mechanism with vectors is one the bundle loads", () => {
  const mechanisms = files.map((name) => parseVectorFile(readFileSync(join(DEFAULT_VECTORS, name), "utf-8")).mechanism);
  assert.ok(mechanisms.length >= 24, `${DEFAULT_VECTORS}: ${mechanisms.length} files`);
  for (const mechanism of mechanisms) assert.ok(Object.hasOwn(bundle.MECHANISM_GROUPS, mechanism), `${mechanism} is not in the bundle`);
});

test("every mechanism of MECHANISM_GROUPS loads from the one chunk the build says holds it", async () => {
  const holder = new Map<string, string>();
  for (const [chunk, info] of Object.entries(meta.chunks)) {
    for (const mechanism of info.mechanisms ?? []) {
      assert.equal(holder.get(mechanism), undefined, `${mechanism} is in two chunks`);
      holder.set(mechanism, chunk);
    }
  }
  assert.deepEqual([...holder.keys()].sort(), Object.keys(bundle.MECHANISM_GROUPS).sort());
  for (const [mechanism, group] of Object.entries(bundle.MECHANISM_GROUPS)) {
    const factories = await group();
    assert.equal(typeof factories[mechanism], "function", `${mechanism} from its group's chunk`);
    const chunk = (await import(new URL(meta.chunks[holder.get(mechanism) as string]!.file, dist).href)) as { FACTORIES: Record<string, unknown> };
    assert.deepEqual(Object.keys(chunk.FACTORIES).sort(), Object.keys(factories).sort(), `${mechanism}: the chunk's file is its group's`);
  }
});

test("each chunk imports only the entry, and every name it borrows is the entry's copy of that name", async () => {
  for (const [chunk, info] of Object.entries(meta.chunks)) {
    assert.ok(info.imports.every((path) => path === "../browser.js"), `${chunk} imports ${info.imports.join(", ")}`);
    for (const [module, name, slot] of info.borrows) {
      const lent = bundle.__ldpModules[slot];
      assert.notEqual(lent, undefined, `${chunk}: ${module} ${name} (slot ${slot}) is not lent`);
      // the entry's copy is its own bundled one: the same kind of value as the module's export
      const path = module.startsWith("src/") ? new URL(module.replace(/\.ts$/, ".js"), dist) : new URL(`../${module}`, dist);
      const source = (await import(path.href)) as Record<string, unknown>;
      assert.equal(typeof lent, typeof source[name], `${chunk}: ${module} ${name} (slot ${slot})`);
      if (typeof lent === "function") assert.equal((lent as () => unknown).length, (source[name] as () => unknown).length, `${chunk}: ${module} ${name}`);
      else if (typeof lent !== "object") assert.equal(lent, source[name], `${chunk}: ${module} ${name}`);
    }
  }
});

/** Every case of a vector file reproduced by a build's mechanisms and word source. */
async function reproduce(
  name: string,
  build: { HmacWordSource: typeof full.HmacWordSource },
  mechanismOf: (config: MechanismConfig) => Mechanism | Promise<Mechanism>,
): Promise<void> {
  const file = parseVectorFile(readFileSync(join(DEFAULT_VECTORS, name), "utf-8"));
  for (const [index, vector] of file.cases.entries()) {
    const mechanism = await mechanismOf(vector.config);
    const rng = new build.HmacWordSource(fromHex(vector.wordsKey, "words_key"));
    const options =
      vector.deviceSecret !== undefined && vector.campaign !== undefined
        ? { rng, keys: new DeviceKeys(fromHex(vector.deviceSecret, "device_secret"), memoScope(vector.campaign, vector.configJson)) }
        : { rng };
    assert.deepEqual(mechanism.toWire(mechanism.perturb([vector.value], options))[0], vector.payload, `${name} case ${index}`);
  }
}

for (const name of files) {
  test(`conformance/vectors/${name} through the browser bundle's chunks`, () => reproduce(name, bundle, (config) => bundle.loadMechanism(config)));
}

test("the single-module build imports nothing and has every mechanism, synchronously", () => {
  const code = readFileSync(new URL("browser-full.js", dist), "utf-8");
  assert.doesNotMatch(code, /\bimport\s*\(|\bfrom\s*["']/, "dist/browser-full.js fetches nothing else");
  assert.deepEqual(Object.keys(full.FACTORIES).sort(), Object.keys(bundle.MECHANISM_GROUPS).sort());
});

for (const name of files) {
  test(`conformance/vectors/${name} through the single-module build`, () => reproduce(name, full, (config) => full.mechanismFromConfig(config)));
}
