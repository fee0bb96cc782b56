import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { type JsonValue, parseJson, toPlain } from "../src/config.js";
import { type VectorCase, parseVectorFile } from "../src/conformance.js";
import { DEFAULT_VECTORS } from "../src/conformance-cli.js";
import { DeviceKeys, memoScope } from "../src/memoization.js";
import { DuchiKernel } from "../src/mechanisms/duchi.js";
import { analyticGaussianSigma } from "../src/mechanisms/gaussian.js";
import { HybridKernel } from "../src/mechanisms/hybrid.js";
import { PiecewiseKernel } from "../src/mechanisms/piecewise.js";
import { mechanismFromConfig } from "../src/mechanisms/registry.js";
import type { MechanismConfig, PerturbOptions } from "../src/mechanisms/types.js";
import { fromHex } from "../src/wire.js";
import { HmacWordSource } from "../src/words.js";

// Every numeric vector is reproduced by test/conformance.test.ts; these are the group's unit tests.

/** The cases of conformance/vectors/<mechanism>.json. */
function vectorCases(mechanism: string): VectorCase[] {
  return parseVectorFile(readFileSync(join(DEFAULT_VECTORS, `${mechanism}.json`), "utf-8")).cases;
}

/** A case's report words. */
const caseWords = (c: { wordsKey: string }): HmacWordSource => new HmacWordSource(fromHex(c.wordsKey, "words_key"));

/** A case's keyed source (its device secret under the scope of its campaign and config). */
const caseKeys = (c: VectorCase): DeviceKeys =>
  new DeviceKeys(fromHex(c.deviceSecret ?? "", "device_secret"), memoScope(c.campaign ?? "", c.configJson));

// ---- batches: perturb(values) consumes words in the Python SDK's vectorized order

/** test/fixtures/numeric_batches.json, written by numeric_batches.py beside it (from dist/test or test). */
function batchFixture(): string {
  for (const relative of ["../../test/fixtures", "fixtures"]) {
    try {
      return readFileSync(new URL(`${relative}/numeric_batches.json`, import.meta.url), "utf-8");
    } catch {
      // try the next place
    }
  }
  throw new Error("test/fixtures/numeric_batches.json not found");
}

const batchJson = parseJson(batchFixture()) as { cases: Record<string, JsonValue>[]; parameters: JsonValue };
const batches = batchJson.cases.map((c) => toPlain(c) as Record<string, unknown>);

batches.forEach((c, index) => {
  const config = c["config"] as MechanismConfig;
  const values = c["values"] as unknown[];
  test(`numeric_batches.json case ${index} (${config.mechanism}, ${values.length} values) as Python's batch`, () => {
    const mechanism = mechanismFromConfig(config);
    const options: PerturbOptions = { rng: new HmacWordSource(fromHex(c["words_key"] as string)) };
    if (typeof c["device_secret"] === "string") {
      const configJson = batchJson.cases[index]!["config"] as JsonValue;
      options.keys = new DeviceKeys(fromHex(c["device_secret"]), memoScope(c["campaign"] as string, configJson));
    }
    assert.deepEqual(mechanism.toWire(mechanism.perturb(values, options)), c["payloads"]);
  });
});

// ---- parameters derived from floats: the same as Python's, bit for bit

const parameters = toPlain(batchJson.parameters) as Parameters;

interface Parameters {
  kernels: {
    epsilon: number;
    duchi_low: string;
    piecewise: [number, string];
    hybrid_alpha: string;
    square_wave: [number, string];
  }[];
  sigmas: [number, number, number, number][];
}

test(`kernel thresholds and windows equal Python's at ${parameters.kernels.length} epsilons`, () => {
  for (const expected of parameters.kernels) {
    const epsilon = expected.epsilon;
    const piecewise = new PiecewiseKernel(epsilon, 1 << 20);
    const wave = (mechanismFromConfig({ mechanism: "square_wave", epsilon, lower: 0, upper: 1, bins: 16 }) as unknown as {
      kernel: PiecewiseKernel;
    }).kernel;
    assert.deepEqual(
      {
        epsilon,
        duchi_low: String(new DuchiKernel(epsilon).lowThreshold),
        piecewise: [piecewise.window, String(piecewise.insideThreshold)],
        hybrid_alpha: String(new HybridKernel(epsilon, 1 << 20).alphaThreshold),
        square_wave: [wave.window, String(wave.insideThreshold)],
      },
      expected,
    );
  }
});

test(`the analytic Gaussian sigma equals Python's at ${parameters.sigmas.length} configs`, () => {
  for (const [epsilon, delta, sensitivity, sigma] of parameters.sigmas) {
    assert.equal(analyticGaussianSigma(epsilon, delta, sensitivity), sigma, `eps=${epsilon} delta=${delta} D=${sensitivity}`);
  }
});

// ---- bad configs and values: errors name the field and the value's type, never a private value

const SECRET = 987654.321;

test("bad configs are refused naming the mechanism and the field", () => {
  const cases: [Record<string, unknown>, RegExp][] = [
    [{ mechanism: "duchi", epsilon: "1", lower: 0, upper: 1 }, /duchi: config\.epsilon must be .*, got string/],
    [{ mechanism: "duchi", epsilon: 1, lower: 0, upper: 1, epsilon_total: 2 }, /config for "duchi" has unknown field\(s\) epsilon_total/],
    [{ mechanism: "laplace", epsilon: 1, lower: 0 }, /config for "laplace" is missing upper/],
    [{ mechanism: "hierarchical", epsilon: 1, k: 8, variant: "haar", branching: 2 }, /config for "hierarchical" has unknown field\(s\) branching/],
    [{ mechanism: "duchi", epsilon: 41, lower: 0, upper: 1 }, /duchi: config\.epsilon must be a positive number at most 40, got number/],
    [{ mechanism: "laplace", epsilon: 1, lower: 2, upper: 1 }, /laplace: config\.upper must be greater than config\.lower/],
    [{ mechanism: "piecewise", epsilon: 1, lower: 0, upper: 1, dim: 0 }, /piecewise: config\.dim must be an integer in \[1, 65536\], got number/],
    [{ mechanism: "hybrid", epsilon: 1, lower: 0, upper: 1, coordinates: 2 }, /hybrid: config\.coordinates .* needs config\.dim/],
    [{ mechanism: "piecewise", epsilon: 1, lower: 0, upper: 1, granularity: 1e-20 }, /piecewise: config\.granularity must give between 1 and 2\*\*40 grid steps/],
    [{ mechanism: "square_wave", epsilon: 1, lower: 0, upper: 1, bins: 1 }, /square_wave: config\.bins must be an integer in \[2, 4096\], got number/],
    [{ mechanism: "gaussian", epsilon: 1, delta: 1e-6, lower: 0, upper: 1, dim: 2, clip_norm: 1 }, /gaussian: config takes lower\/upper .* not both/],
    [{ mechanism: "gaussian", epsilon: 1, delta: 2, lower: 0, upper: 1 }, /gaussian: config\.delta must be a number in \(0, 1\), got number/],
    [{ mechanism: "gaussian", epsilon: 1.5, delta: 1e-6, lower: 0, upper: 1, calibration: "classic" }, /classic calibration is valid only for config\.epsilon < 1/],
    [{ mechanism: "onebitmean", epsilon: 1, lower: 0, upper: 1, gamma: 0.5 }, /onebitmean: config\.gamma must be a number in \[0, 0\.5\), got number/],
    [{ mechanism: "onebitmean", epsilon: 1, lower: 0, upper: 1, memoize: "yes" }, /onebitmean: config\.memoize must be true or false, got string/],
    [{ mechanism: "hierarchical", epsilon: 1, k: 8, variant: "wavelet" }, /hierarchical: config\.variant must be "haar"/],
    [{ mechanism: "hierarchical", epsilon: 1, k: 1 }, /hierarchical: config\.k must be an integer in \[2, 2048\], got number/],
    [{ mechanism: "fourier", epsilon: 1, attributes: [{ name: "a", k: 3 }] }, /attributes\[0\]\.k must be 2 \(Fourier marginals are over binary attributes\); got 3/],
    [{ mechanism: "fourier", epsilon: 1, attributes: [{ name: "a", kind: "x" }] }, /attributes\[0\] has unknown field\(s\) kind/],
    [{ mechanism: "fourier", epsilon: 1, attributes: "a,b" }, /attributes must be a list of 1 to 64 \{name, k\}; got string/],
  ];
  for (const [config, message] of cases) {
    assert.throws(() => mechanismFromConfig(config as never), message, JSON.stringify(config));
  }
});

test("bad values are refused naming the index and the type, never the value", () => {
  const words = (): PerturbOptions => ({ rng: caseWords(vectorCases("duchi")[0]!) });
  const scalar = mechanismFromConfig({ mechanism: "laplace", epsilon: 1, lower: 0, upper: 1 });
  const vector = mechanismFromConfig({ mechanism: "duchi", epsilon: 1, lower: 0, upper: 1, dim: 3 });
  const fourierMechanism = mechanismFromConfig({
    mechanism: "fourier",
    epsilon: 1,
    attributes: [{ name: "wifi", labels: ["off", "on"] }, { name: "dark" }],
    order: 2,
  });
  const expectations: [() => unknown, RegExp][] = [
    [() => scalar.perturb([0.5, String(SECRET)], words()), /values\[1\] must be a finite number, got string/],
    [() => scalar.perturb([Number.NaN], words()), /values\[0\] must be a finite number, got NaN/],
    [() => scalar.perturb([Infinity], words()), /values\[0\] must be a finite number, got an infinite number/],
    [() => scalar.perturb(SECRET as never, words()), /values must be an array, got number/],
    [() => vector.perturb([[SECRET, 0]], words()), /values\[0\] must be an array of 3 numbers, got an array of length 2/],
    [() => vector.perturb([[0, { v: SECRET }, 0]], words()), /values\[0\]\[1\] must be a finite number, got object/],
    [() => fourierMechanism.perturb([{ wifi: `x${SECRET}`, dark: 1 }], words()), /values\[0\], attribute "wifi" \(a string\) must be one of its 2 labels/],
    [() => fourierMechanism.perturb([{ wifi: "on", dark: SECRET }], words()), /values\[0\], attribute "dark" \(a number\) must be an integer in \[0, 2\)/],
    [() => fourierMechanism.perturb([{ wifi: "on" }], words()), /values\[0\] misses attribute "dark"/],
  ];
  for (const [call, message] of expectations) {
    assert.throws(call, (error: Error) => {
      assert.match(error.message, message);
      assert.ok(!error.message.includes(String(SECRET)), `the value leaked: ${error.message}`);
      return true;
    });
  }
});

test("memoized onebitmean needs the device's keyed source; unmemoized refuses one", () => {
  const memoized = mechanismFromConfig({ mechanism: "onebitmean", epsilon: 1, lower: 0, upper: 1 });
  assert.throws(() => memoized.perturb([0.5], { rng: caseWords(vectorCases("duchi")[0]!) }), /onebitmean: perturb needs \{keys\}/);
  const plain = vectorCases("onebitmean").find((c) => c.config["memoize"] === false)!;
  const keyed = vectorCases("onebitmean").find((c) => c.config["memoize"] === true)!;
  const options: PerturbOptions = { rng: caseWords(plain), keys: caseKeys(keyed) };
  assert.throws(() => mechanismFromConfig(plain.config).perturb([0.5], options), /takes no keyed source/);
});

test("mechanisms without per-device draws refuse a keyed source", () => {
  const keyed = vectorCases("onebitmean").find((c) => c.config["memoize"] === true)!;
  for (const config of [
    { mechanism: "duchi", epsilon: 1, lower: 0, upper: 1 },
    { mechanism: "hybrid", epsilon: 1, lower: 0, upper: 1, dim: 2 },
    { mechanism: "laplace", epsilon: 1, lower: 0, upper: 1 },
    { mechanism: "gaussian", epsilon: 1, delta: 1e-6, lower: 0, upper: 1 },
    { mechanism: "square_wave", epsilon: 1, lower: 0, upper: 1, bins: 4 },
  ]) {
    const value = "dim" in config ? [0.5, 0.5] : 0.5;
    assert.throws(() => mechanismFromConfig(config).perturb([value], { keys: caseKeys(keyed) }), /is not memoized; it takes no keys/);
  }
});

test("the default word source is the platform CSPRNG", () => {
  const mechanism = mechanismFromConfig({ mechanism: "laplace", epsilon: 1, lower: 0, upper: 1 });
  const reports = mechanism.perturb(new Array(200).fill(0.5)) as number[];
  assert.ok(new Set(reports).size > 150, "fresh noise per report");
});
