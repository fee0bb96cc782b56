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

const categorical: GroupLoader = () => import("./categorical.js").then((group) => group.CATEGORICAL_FACTORIES);
const rapporDbitflip: GroupLoader = () => import("./rappor-dbitflip.js").then((group) => group.RAPPOR_DBITFLIP_FACTORIES);
const numeric: GroupLoader = () => import("./numeric.js").then((group) => group.NUMERIC_FACTORIES);
const strings: GroupLoader = () => import("./strings.js").then((group) => group.STRINGS_FACTORIES);
const multiFourierHierarchical: GroupLoader = () =>
  import("./multi-fourier-hierarchical.js").then((group) => group.MULTI_FOURIER_HIERARCHICAL_FACTORIES);

/** Every mechanism a device can randomize, and the group whose module holds its factory. */
export const MECHANISM_GROUPS: Readonly<Record<string, GroupLoader>> = {
  grr: categorical,
  sue: categorical,
  oue: categorical,
  ss: categorical,
  olh: categorical,
  blh: categorical,
  hr: categorical,
  dbitflip: rapporDbitflip,
  rappor: rapporDbitflip,
  duchi: numeric,
  piecewise: numeric,
  hybrid: numeric,
  laplace: numeric,
  gaussian: numeric,
  onebitmean: numeric,
  square_wave: numeric,
  hierarchical: multiFourierHierarchical,
  fourier: multiFourierHierarchical,
  cms: strings,
  hcms: strings,
  pem: strings,
  multi: multiFourierHierarchical,
  pckv: strings,
  sfp: strings,
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
