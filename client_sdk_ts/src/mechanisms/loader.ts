/**
 * Mechanisms loaded when a campaign first needs them. Each group of mechanisms is its own module
 * (and its own chunk of the browser bundle, dist/browser.js): a page recording one categorical
 * campaign loads the categorical oracles and nothing of the numeric or string mechanisms.
 *
 *     const mechanism = await loadMechanism(config);   // imports the group's chunk once
 *
 * `mechanismFromConfig` (registry.ts) is the synchronous form for Node, with every group loaded.
 */
import type { Mechanism, MechanismConfig, MechanismFactory } from "./types.js";

/** Imports one group's module and gives its factories by mechanism name. */
export type GroupLoader = () => Promise<Readonly<Record<string, MechanismFactory>>>;

/**
 * The groups: each module under groups/ exports its mechanisms' `FACTORIES` and is one chunk of
 * the browser bundle (scripts/build-browser.mjs), so a page loads the code of the mechanism it
 * records and little else: the oracles with number reports apart from those with bit rows, each
 * string mechanism apart (each needs BLAKE2b and its own sketch).
 */
const group = (load: () => Promise<{ FACTORIES: Readonly<Record<string, MechanismFactory>> }>): GroupLoader => () => load().then((module) => module.FACTORIES);
const categorical = group(() => import("./groups/categorical.js"));
const categoricalRows = group(() => import("./groups/categorical-rows.js"));
const rapporDbitflip = group(() => import("./groups/rappor-dbitflip.js"));
const bounded = group(() => import("./groups/bounded.js"));
const laplaceGaussian = group(() => import("./groups/laplace-gaussian.js"));
const cms = group(() => import("./groups/cms.js"));
const hcms = group(() => import("./groups/hcms.js"));
const sfp = group(() => import("./groups/sfp.js"));
const pemPckv = group(() => import("./groups/pem-pckv.js"));
const multi = group(() => import("./groups/multi.js"));
const fourierHierarchical = group(() => import("./groups/fourier-hierarchical.js"));

/** Every mechanism a device can randomize, and the group whose module holds its factory. */
export const MECHANISM_GROUPS: Readonly<Record<string, GroupLoader>> = {
  grr: categorical,
  sue: categoricalRows,
  oue: categoricalRows,
  ss: categoricalRows,
  olh: categorical,
  blh: categorical,
  hr: categorical,
  dbitflip: rapporDbitflip,
  rappor: rapporDbitflip,
  duchi: bounded,
  piecewise: bounded,
  hybrid: bounded,
  laplace: laplaceGaussian,
  gaussian: laplaceGaussian,
  onebitmean: bounded,
  square_wave: bounded,
  hierarchical: fourierHierarchical,
  fourier: fourierHierarchical,
  cms: cms,
  hcms: hcms,
  pem: pemPckv,
  multi: multi,
  pckv: pemPckv,
  sfp: sfp,
};

/** The factories of the groups loaded so far (in Node, registry.ts registers them all at import). */
const loaded = new Map<string, MechanismFactory>();

/** Make `factories` available to {@link loadedMechanism} without an import. */
export function registerFactories(factories: Readonly<Record<string, MechanismFactory>>): void {
  for (const [name, factory] of Object.entries(factories)) loaded.set(name, factory);
}

/** The name of the mechanism `config` asks for; throws naming the field when it is not a device mechanism. */
export function mechanismName(config: MechanismConfig): string {
  if (config === null || typeof config !== "object" || Array.isArray(config)) {
    throw new TypeError(`config must be an object, got ${config === null ? "null" : typeof config}`);
  }
  const name = config.mechanism;
  if (typeof name !== "string") {
    throw new TypeError(`config.mechanism must be a string, got ${typeof name}`);
  }
  if (!Object.hasOwn(MECHANISM_GROUPS, name)) {
    throw new Error(
      `mechanism ${JSON.stringify(name)} is not supported in this version of ldp-telemetry ` +
        `(supported: ${Object.keys(MECHANISM_GROUPS).sort().join(", ")})`,
    );
  }
  return name;
}

/** The device mechanism of `config` when its group is loaded already, else `undefined`. */
export function loadedMechanism(config: MechanismConfig): Mechanism | undefined {
  const factory = loaded.get(mechanismName(config));
  return factory === undefined ? undefined : factory(config);
}

/** The device mechanism of a canonical config, importing its group's module the first time. */
export async function loadMechanism(config: MechanismConfig): Promise<Mechanism> {
  const name = mechanismName(config);
  let factory = loaded.get(name);
  if (factory === undefined) {
    registerFactories(await (MECHANISM_GROUPS[name] as GroupLoader)());
    factory = loaded.get(name);
    if (factory === undefined) throw new Error(`mechanism ${JSON.stringify(name)}: its group's module does not define it`);
  }
  return factory(config);
}

/** The mechanism at once when its code is loaded (always in Node through index.ts), else a promise of it. */
export function mechanismNowOrLater(config: MechanismConfig): Mechanism | Promise<Mechanism> {
  return loadedMechanism(config) ?? loadMechanism(config);
}

/**
 * `mechanismFromConfig` of the browser bundle: synchronous like Node's, for the groups loaded so
 * far (by `loadMechanism` or a campaign the client recorded); throws, naming the mechanism, for a
 * group not loaded yet rather than pull every mechanism into the page.
 */
export function mechanismFromLoaded(config: MechanismConfig): Mechanism {
  const mechanism = loadedMechanism(config);
  if (mechanism === undefined) {
    throw new Error(
      `mechanism ${JSON.stringify(config.mechanism)}: its code is not loaded in this bundle yet; ` +
        "call `await loadMechanism(config)` (which loads it) instead of mechanismFromConfig",
    );
  }
  return mechanism;
}
